"""Row 3: a ``todo_write`` that returns only once its event is on disk, vs a bare fsync'd append."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from report import Row, fmt_ns, skipped
from timing import paired
from workloads import new_host, raw_args

DURABLE_TARGET = 1.2
SIZE = 20


def rows(calls: int) -> list[Row]:
    try:
        from dsh_tool_todo.sessionlog import JsonlSession
    except ImportError:
        return [skipped("3 call, durable", f"{SIZE} items", "no dsh_tool_todo.sessionlog")]
    directory = Path(tempfile.mkdtemp(prefix="dsh-todo-fsync-"))
    try:
        return [_measure(JsonlSession, directory, calls), _unsynced(JsonlSession, directory)]
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _measure(session_type: Any, directory: Path, calls: int) -> Row:
    host = new_host()
    raw = raw_args(SIZE)
    session_path = directory / "session.jsonl"
    with (
        session_type(session_path, fsync=True) as session,
        open(directory / "bare.jsonl", "ab") as bare,
    ):
        agent = host.new_agent(session=session)
        host.call_tool("todo_write", raw, agent=agent)
        line = session_path.read_bytes()  # the very bytes one call appends

        def contender() -> object:
            return host.call_tool("todo_write", raw, agent=agent)

        def reference() -> None:
            bare.write(line)
            bare.flush()
            os.fsync(bare.fileno())

        # fsync time swings with the disk's other work; many short rounds keep it paired
        result = paired(contender, reference, seconds=0, batch_ns=1, min_rounds=calls)
    return Row(
        "3 call, durable",
        f"{SIZE} items, fsync",
        f"call_tool+JsonlSession {fmt_ns(result.contender_ns)}",
        f"write+flush+fsync {fmt_ns(result.reference_ns)}",
        result.ratio,
        f"≤{DURABLE_TARGET}x",
        result.ratio <= DURABLE_TARGET,
        note=f"{len(line)} bytes a call, {result.rounds} rounds",
        numbers={
            "contender_ns": result.contender_ns,
            "reference_ns": result.reference_ns,
            "rounds": result.rounds,
            "bytes": len(line),
        },
    )


def _unsynced(session_type: Any, directory: Path) -> Row:
    """For information: what the log adds to a call when the OS may keep the bytes a while."""
    host = new_host()
    raw = raw_args(SIZE)
    memory = host.new_agent()
    with session_type(directory / "unsynced.jsonl") as session:
        agent = host.new_agent(session=session)

        def contender() -> object:
            return host.call_tool("todo_write", raw, agent=agent)

        def reference() -> object:
            return host.call_tool("todo_write", raw, agent=memory)

        result = paired(contender, reference, seconds=1.0, reset=memory.session.events.clear)
    return Row(
        "3 call, on disk",
        f"{SIZE} items, no fsync",
        f"call_tool+JsonlSession {fmt_ns(result.contender_ns)}",
        f"call_tool+MemorySession {fmt_ns(result.reference_ns)}",
        result.ratio,
        "info",
        numbers={"contender_ns": result.contender_ns, "reference_ns": result.reference_ns},
    )
