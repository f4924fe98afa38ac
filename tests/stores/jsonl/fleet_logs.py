"""A directory of logs of every shape a fleet can hold, for the tests of reading it at once.

``dsh-todo sessions`` reads each short log once for its list row and its current turn
(``JsonlReader.sessions_paged``); what it shows must be what the reader protocol's list and
tail pages give, log by log, for every log: these are the logs to compare them on.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from dsh_tool_todo.core.contract import (
    EVENT_TYPE,
    LINK_EVENT_TYPE,
    SESSION_END_EVENT_TYPE,
    TURN_START,
)
from dsh_tool_todo.core.links import end_data
from tests.stores.jsonl.log_lines import line


def _plan(*pairs: tuple[str, str]) -> dict[str, Any]:
    return {"todos": [{"content": content, "status": status} for content, status in pairs]}


def _write(directory: Path, name: str, *lines: bytes) -> None:
    (directory / f"{name}.jsonl").write_bytes(b"".join(lines))


def _turn(seq: int, *statuses: str) -> list[bytes]:
    """A turn/start at ``seq`` and one write per status of item "A" (item "B" pending)."""
    found = [line(seq, TURN_START, {})]
    for offset, status in enumerate(statuses, 1):
        found.append(line(seq + offset, EVENT_TYPE, _plan(("A", status), ("B", "pending"))))
    return found


def write_fleet(directory: Path) -> None:
    """Logs short and long, linked and ended, broken in each way a reader tells apart."""
    _write(directory, "plain", *_turn(0, "pending", "in_progress", "in_progress", "completed"))
    _write(
        directory,
        "lead%2fworker%40call_1",
        line(0, LINK_EVENT_TYPE, {"parent": "lead", "parentCallId": "call_1"}),
        *_turn(1, "in_progress", "completed"),
        line(4, SESSION_END_EVENT_TYPE, end_data("failed", "the search timed out")),
    )
    _write(directory, "lead", *_turn(0, "in_progress"))
    _write(directory, "orphan", line(0, LINK_EVENT_TYPE, {"parent": "gone"}), *_turn(1, "pending"))
    _write(directory, "cycle-a", line(0, LINK_EVENT_TYPE, {"parent": "cycle-b"}))
    _write(directory, "cycle-b", line(0, LINK_EVENT_TYPE, {"parent": "cycle-a"}))
    _write(directory, "empty")
    _write(directory, "torn", *_turn(0, "in_progress"), b'{"seq":2,"ty')
    _write(directory, "foreign-tail", *_turn(0, "in_progress"), b"not json")
    _write(directory, "binary", b"\xff\xfe\x00\n")
    # a line no event, before the turn: the row reads back to its plan only, the turn further
    _write(directory, "broken-early", b"{not an event}\n", *_turn(1, "pending", "in_progress"))
    # a write no tool could make, in an earlier turn: the turn's read back checks it
    bad = {"todos": [{"content": "", "status": "pending"}]}
    _write(directory, "bad-old", line(0, EVENT_TYPE, bad), *_turn(1, "in_progress"))
    _write(directory, "bad-last", *_turn(0, "in_progress"), line(2, EVENT_TYPE, bad))
    _write(
        directory,
        "called",
        line(0, EVENT_TYPE, {**_plan(("A", "in_progress")), "callId": "c1"}),
        line(1, "message/user", {"text": "go on"}),
    )
    _write(directory, "stuck", *_turn(0, *["in_progress"] * 6))
    _write(directory, "no-turn", line(0, EVENT_TYPE, _plan(("A", "pending"))))
    _write(directory, "negative", line(-5, EVENT_TYPE, _plan(("A", "pending"))))
    # more ends after the last write than one page holds
    ends = [line(2 + n, SESSION_END_EVENT_TYPE, end_data("finished")) for n in range(230)]
    _write(directory, "many-ends", *_turn(0, "in_progress"), *ends)
    # longer than one read of a short log: read as a list reads it, then by tail pages
    _write(directory, "long", *_turn(0, *["pending", "in_progress", "completed"] * 150))
    # a turn of more writes than the signals are read from, "A" in progress all along
    writes = [
        line(n, EVENT_TYPE, _plan(("A", "in_progress"), ("B", ("pending", "completed")[n % 2])))
        for n in range(1, 1101)
    ]
    _write(directory, "endless", line(0, TURN_START, {}), *writes)
    _write(directory, "café", *_turn(0, "in_progress"))
    _write(directory, "back\\slash", *_turn(0, "in_progress"))
    _write(directory, ".hidden", *_turn(0, "in_progress"))
    (directory / "dir.jsonl").mkdir()
    os.symlink("plain.jsonl", directory / "alias.jsonl")
    os.symlink("nowhere.jsonl", directory / "dangling.jsonl")
