"""A writer killed with SIGKILL at random moments: every whole event survives, the torn one goes."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import pytest

from dsh_tool_todo import replay
from dsh_tool_todo.core.contract import EVENT_TYPE
from dsh_tool_todo.errors import TornTailWarning
from dsh_tool_todo.stores.jsonl import JsonlSession, current_plan, read_events
from tests._processes import stop_process
from tests.stores.jsonl.half_writes import HALF_WRITES

pytestmark = pytest.mark.skipif(os.name != "posix", reason="SIGKILL is POSIX")

ROUNDS, DEADLINE_S, MIN_ROUNDS = 20, 40.0, 8

# Appends plans marked with the round and a counter, until it is killed. In a
# "slow" round each write(2) hands the kernel half of what is left and pauses,
# as a kernel may under pressure: a kill then mostly lands inside a line.
WRITER = (
    HALF_WRITES
    + r"""
import sys
import dsh_tool_todo.stores.jsonl.session as sessionlog

path, round_, slow = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "slow"
if slow:
    sessionlog.os = HalfWrites(0.002)
session = sessionlog.JsonlSession(path)
print("ready", flush=True)
count = 0
while True:
    size = 100 if count % 5 == 4 else 1 + count % 7
    todos = [
        {"content": f"r{round_} c{count} s{step}", "status": "pending"} for step in range(size)
    ]
    session.append("todo/write", {"todos": todos})
    count += 1
"""
)


def run_and_kill(path: Path, round_: int, slow: bool, rng: random.Random) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path), str(round_), "slow" if slow else "fast"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert child.stdout is not None
        ready = child.stdout.readline()
        assert ready == b"ready\n", child.communicate(timeout=10)[1].decode()
        time.sleep(rng.uniform(0.0, 0.04))
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=10)
    finally:
        stop_process(child)
    assert child.returncode == -signal.SIGKILL  # killed while writing, not failed


def read_logged(path: Path) -> tuple[list[dict[str, Any]], list[warnings.WarningMessage]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        events = read_events(path)
    return events, caught


def check_after_kill(path: Path, round_: int, checked: int) -> tuple[int, bool]:
    """Check the log the killed writer left, reopen it and append: (whole events, torn?).

    The ``checked`` events before this round were compared in earlier rounds,
    and their bytes are checked unchanged; only this round's are parsed again.
    """
    raw = path.read_bytes()
    whole = raw.rfind(b"\n") + 1
    torn = raw[whole:]
    events, caught = read_logged(path)
    assert [warning.category for warning in caught] == ([TornTailWarning] if torn else [])

    assert len(events) == raw.count(b"\n")
    assert [event["seq"] for event in events] == list(range(len(events)))
    new_lines = raw[:whole].splitlines()[checked:]
    assert events[checked:] == [json.loads(line) for line in new_lines]
    replay(events[checked:], verify=True)  # raises unless each is a snapshot the tool could write
    counters = [
        int(event["data"]["todos"][0]["content"].split()[1][1:]) for event in events[checked:]
    ]
    assert counters == list(range(len(counters)))  # no whole event of this round went missing

    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        assert current_plan(path) == events[-1]["data"]["todos"]

    if torn:
        with pytest.warns(TornTailWarning, match="torn last line"):
            session = JsonlSession(path)
    else:
        session = JsonlSession(path)
    with session:
        assert path.stat().st_size == whole  # the torn bytes are cut off, nothing more
        mark = [{"content": f"after r{round_}", "status": "in_progress"}]
        assert session.append(EVENT_TYPE, {"todos": mark})["seq"] == len(events)
    after = path.read_bytes()
    assert after[:whole] == raw[:whole]  # every whole line kept, byte for byte
    appended = {"seq": len(events), "type": EVENT_TYPE, "data": {"todos": mark}}
    assert [json.loads(line) for line in after[whole:].splitlines()] == [appended]
    return len(events), bool(torn)


def test_a_writer_killed_at_random_moments_loses_only_its_torn_line(tmp_path: Path) -> None:
    path = tmp_path / "session.jsonl"
    with JsonlSession(path) as session:  # the log starts with one event, never empty
        session.append(EVENT_TYPE, {"todos": [{"content": "after start", "status": "pending"}]})
    rng = random.Random(20240601)
    deadline = time.monotonic() + DEADLINE_S
    rounds = torn_rounds = 0
    checked = 1  # the round's events follow the mark its predecessor appended
    while rounds < ROUNDS and time.monotonic() < deadline:
        run_and_kill(path, rounds, slow=rounds % 2 == 1, rng=rng)
        whole, torn = check_after_kill(path, rounds, checked)
        checked = whole + 1
        torn_rounds += torn
        rounds += 1
    assert rounds >= MIN_ROUNDS
    assert torn_rounds >= 1  # the torn-tail path really ran
