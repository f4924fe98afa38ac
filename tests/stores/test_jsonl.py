"""The store contract, run against the JSON Lines session log."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from dsh_tool_todo.projection import replay
from dsh_tool_todo.stores.jsonl import JsonlSession, read_events

from .contract import DurableContract, Event, Opener


class TestJsonlSession(DurableContract):
    refused_at_open = True  # the writer holds an flock for the session's life

    @pytest.fixture
    def path(self, tmp_path: Path) -> Path:
        return tmp_path / "agent.jsonl"

    @pytest.fixture
    def open_session(self, path: Path) -> Opener:
        return lambda: JsonlSession(path)

    @pytest.fixture
    def read_log(self, path: Path) -> Callable[[], list[Event]]:
        def read() -> list[Event]:
            events = read_events(path)
            replay(events)  # the reader that checks each todo/write
            return events

        return read

    @pytest.fixture
    def write_foreign(self, path: Path) -> Callable[[int, str, str], None]:
        def write(seq: int, kind: str, text: str) -> None:
            line = f'{{"seq":{seq},"type":{json.dumps(kind)},"data":{text}}}\n'
            with path.open("a", encoding="utf-8") as file:
                file.write(line)

        return write

    @pytest.fixture
    def log_name(self, path: Path) -> str:
        return re.escape(str(path))

    def where(self, seq: int) -> str:
        # read_events names the line; replay, the event's position in the log
        return rf"(line {seq + 1}\b|event {seq}\b)"
