"""The store contract's parts that apply to the in-memory session."""

from __future__ import annotations

import pytest

from dsh_tool_todo.stores.memory import MemorySession

from .contract import Opener, SessionContract


class TestMemorySession(SessionContract):
    @pytest.fixture
    def open_session(self) -> Opener:
        return MemorySession
