"""The store contract, run against the JSON Lines session log."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from dsh_tool_todo.core.contract import EVENT_TYPE
from dsh_tool_todo.core.projection import replay
from dsh_tool_todo.errors import TornTailWarning
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


# --- a writer killed mid-append, then the same call retried (issue 23) -----------------

# A writer whose append stops where a kill -9 can find it: after half its line
# ("torn") or after the whole line, before append returns ("whole"). It prints
# where it stopped, then waits to be killed.
KILLED_WRITER = r"""
import os, signal, sys
from dsh_tool_todo.stores.jsonl import JsonlSession, session as module

path, where = sys.argv[1], sys.argv[2]
write_all = module._write_all

def stop(fd, line):
    if where == "torn":
        os.write(fd, line[: len(line) // 2])
    else:
        write_all(fd, line)
    print(where, flush=True)
    signal.pause()

module._write_all = stop
session = JsonlSession(path)
session.append("todo/write", {"todos": [{"content": "Plan", "status": "pending"}],
                              "callId": "call_1"})
"""
RETRIED = {"todos": [{"content": "Plan", "status": "pending"}], "callId": "call_1"}


@pytest.mark.parametrize("where", ["torn", "whole"])
def test_a_writer_killed_mid_append_then_the_call_retried_leaves_one_snapshot(
    tmp_path: Path, where: str
) -> None:
    path = tmp_path / "agent.jsonl"
    with JsonlSession(path) as session:
        session.append("turn/start", {})
    child = subprocess.Popen(
        [sys.executable, "-c", KILLED_WRITER, str(path), where], stdout=subprocess.PIPE
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline() == f"{where}\n".encode()
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
        if child.stdout is not None:
            child.stdout.close()
    assert child.returncode == -signal.SIGKILL
    if where == "torn":
        with pytest.warns(TornTailWarning, match="cut off"):
            retry = JsonlSession(path)
    else:
        retry = JsonlSession(path)
    with retry:  # the engine runs the step again: the same call, the same id
        answer = retry.append(EVENT_TYPE, RETRIED)
        assert retry.append(EVENT_TYPE, RETRIED) == answer
    assert answer == {"seq": 1, "type": EVENT_TYPE, "data": RETRIED}
    assert read_events(path) == [{"seq": 0, "type": "turn/start", "data": {}}, answer]
