"""Row 3: a ``todo_write`` that returns only once its event is on disk, vs a bare fsync'd append."""

from __future__ import annotations

import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from report import Row, fmt_ns, skipped
from timing import paired, spread
from workloads import CALL_SIZES, KeyedSession, new_host, raw_args, real_args

DURABLE_TARGET = 1.2
CALL_ID_TARGET = 1.05  # a call with a call id vs the same call without one
SIZE = 20


def rows(calls: int) -> list[Row]:
    try:
        from dsh_tool_todo.stores.jsonl import JsonlSession
    except ImportError:
        return [skipped("3 call, durable", f"{SIZE} items", "no dsh_tool_todo.stores.jsonl")]
    directory = Path(tempfile.mkdtemp(prefix="dsh-todo-fsync-"))
    try:
        return [
            _measure(JsonlSession, directory, calls, CALL_SIZES[0]),
            _measure(JsonlSession, directory, calls, SIZE),
            _unsynced(JsonlSession, directory),
            _call_ids(JsonlSession, directory, calls, fsync=True),
            _call_ids(JsonlSession, directory, calls, fsync=False),
            _after_fsync(directory, calls),
        ]
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _measure(session_type: Any, directory: Path, calls: int, size: int) -> Row:
    host = new_host()
    raw = real_args(size) if size in CALL_SIZES else raw_args(size)
    session_path = directory / f"session-{size}.jsonl"
    with (
        session_type(session_path, fsync=True) as session,
        open(directory / f"bare-{size}.jsonl", "ab") as bare,
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
        f"{size} items, fsync",
        f"call_tool+JsonlSession {fmt_ns(result.contender_ns)}",
        f"write+flush+fsync {fmt_ns(result.reference_ns)}",
        result.ratio,
        f"≤{DURABLE_TARGET}x",
        result.ratio <= DURABLE_TARGET,
        note=f"{len(line)} bytes a call, {result.rounds} rounds, middle half {result.spread}",
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


def _call_ids(session_type: Any, directory: Path, calls: int, *, fsync: bool) -> Row:
    """A call whose ``todo/write`` carries a new call id (checked against the turn's ids)
    vs the same call without one, each on a log of its own.

    The target is the durable call's (the fsync'd row); without fsync the row is for
    information: it shows the check's own cost, and the id's bytes, in microseconds.
    """
    host = new_host()
    raw = real_args(CALL_SIZES[0])
    kind = "fsync" if fsync else "no-fsync"
    with (
        session_type(directory / f"keyed-{kind}.jsonl", fsync=fsync) as keyed_log,
        session_type(directory / f"plain-{kind}.jsonl", fsync=fsync) as plain_log,
    ):
        keyed = host.new_agent(session=KeyedSession(keyed_log))
        plain = host.new_agent(session=KeyedSession(plain_log, keyed=False))

        def contender() -> object:
            return host.call_tool("todo_write", raw, agent=keyed)

        def reference() -> object:
            return host.call_tool("todo_write", raw, agent=plain)

        if fsync:
            result = paired(contender, reference, seconds=0, batch_ns=1, min_rounds=calls)
        else:
            result = paired(contender, reference, seconds=1.0)
    return Row(
        "3 call, durable" if fsync else "3 call, on disk",
        f"{CALL_SIZES[0]} items, {kind}, call id",
        f"with a new call id {fmt_ns(result.contender_ns)}",
        f"without {fmt_ns(result.reference_ns)}",
        result.ratio,
        f"≤{CALL_ID_TARGET}x" if fsync else "info",
        result.ratio <= CALL_ID_TARGET if fsync else None,
        note=f"{result.rounds} rounds, middle half {result.spread}; "
        f"{fmt_ns(result.contender_ns - result.reference_ns)} a call",
        numbers={"contender_ns": result.contender_ns, "reference_ns": result.reference_ns},
    )


def _after_fsync(directory: Path, calls: int) -> Row:
    """The in-memory call right after an ``fsync`` (the process slept in the kernel) vs hot.

    This is the work a durable call does between two syncs; what it loses to the
    caches the sleep cooled is what moving work off that path could win at most.
    """
    host = new_host()
    raw = real_args(CALL_SIZES[0])
    agent = host.new_agent()
    clear = agent.session.events.clear
    cold_ns: list[float] = []
    hot_ns: list[float] = []
    with open(directory / "sync.jsonl", "ab") as bare:
        for _ in range(50):  # warm-up
            host.call_tool("todo_write", raw, agent=agent)
        for _ in range(calls):
            bare.write(b"x" * 200 + b"\n")
            bare.flush()
            os.fsync(bare.fileno())
            start = time.perf_counter_ns()
            host.call_tool("todo_write", raw, agent=agent)
            cold_ns.append(time.perf_counter_ns() - start)
            start = time.perf_counter_ns()
            host.call_tool("todo_write", raw, agent=agent)
            hot_ns.append(time.perf_counter_ns() - start)
            clear()
    ratios = [cold / hot for cold, hot in zip(cold_ns, hot_ns, strict=True)]
    ratio = spread(ratios)
    cold, hot = statistics.median(cold_ns), statistics.median(hot_ns)
    return Row(
        "3 work between syncs",
        f"{CALL_SIZES[0]} items, in memory",
        f"call right after an fsync {fmt_ns(cold)}",
        f"the next call {fmt_ns(hot)}",
        ratio.median,
        "info",
        note=f"middle half {ratio.text()}; at most {fmt_ns(cold - hot)} a durable call "
        "could win by moving work off the path between syncs",
        numbers={"cold_ns": cold, "hot_ns": hot, "rounds": calls},
    )
