"""The seams: a session, a reader's figures, checked as a host or a viewer relies on them."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh_tool_todo.protocols import Progress, Session, StoreSession
from dsh_tool_todo.stores.jsonl import JsonlSession
from dsh_tool_todo.stores.memory import MemorySession


def test_the_stores_sessions_are_sessions_and_store_sessions(tmp_path: Path) -> None:
    memory = MemorySession()
    with JsonlSession(tmp_path / "log.jsonl") as jsonl:
        for session in (memory, jsonl):
            assert isinstance(session, Session)
            assert isinstance(session, StoreSession)


def test_an_object_without_append_is_not_a_session() -> None:
    class NoAppend:
        def record(self, type: str) -> None:
            return None

    assert not isinstance(NoAppend(), Session)


@pytest.mark.parametrize(
    ("progress", "shown"),
    [
        (Progress(0, 0, 0, True), {"completed": 0, "total": 0, "inProgress": 0, "cleared": True}),
        (Progress(2, 5, 1, False), {"completed": 2, "total": 5, "inProgress": 1, "cleared": False}),
    ],
)
def test_progress_is_shown_with_the_web_views_keys(
    progress: Progress, shown: dict[str, object]
) -> None:
    assert progress.as_json() == shown
