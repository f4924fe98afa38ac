"""Follow a growing JSONL session log and yield its plan each time the plan changes.

The follower keeps no bytes between polls: each poll reads on from the end of
the last whole line it consumed, so a line still being written (or torn and
later cut off) is never glued onto another. When the file was replaced (a new
inode), shrank below what was consumed, or no longer holds the last line
consumed, it starts over from the current plan, read from the end as
:func:`~dsh_tool_todo.logread.current_plan` reads it, never from byte 0.
Every line it reads is checked as ``dsh-todo show`` checks it, so it only
yields plans ``show`` would print for the same bytes.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import BinaryIO

from .contract import EVENT_TYPE
from .logread import (
    checked_write,
    invalid_line,
    line_number,
    line_start,
    open_log,
    parse_event,
    plan_before,
    whole_end,
)
from .projection import Plan, TodosProjection

MARK = 32
"""Bytes kept from each end of the last line consumed, to tell that the file still holds it."""


@dataclass(frozen=True)
class _Position:
    """How far a follower has read, and what it read last."""

    identity: tuple[int, int]  # (st_dev, st_ino) of the file read
    end: int  # the end of the whole lines consumed
    start: int  # where the last of them starts
    mark: bytes  # its first and last MARK bytes
    seen: tuple[int, int, int]  # (size, mtime, ctime) at the last look: unchanged, nothing to do


def follow_plan(
    path: str | os.PathLike[str], *, interval: float, sleep: Callable[[float], None]
) -> Iterator[Plan]:
    """Yield the current plan, then each new one as events are appended, forever.

    Starts from the end of the file, so following a long log costs nothing up
    front; a line still being written waits for its newline. Raises
    :class:`~dsh_tool_todo.errors.InvalidLog` for what ``show`` refuses (a line
    that is not an event, an invalid ``todo/write``, a tail that is no torn
    append) and for what is not a regular file.
    """
    name = os.fspath(path)
    unit = TodosProjection()
    with open_log(name) as log:
        state, position = _start(log, name)
    yield unit.view(state)
    while True:
        sleep(interval)
        with open_log(name) as log:
            info = os.fstat(log.fileno())
            if (
                (info.st_dev, info.st_ino) != position.identity
                or info.st_size < position.end
                or _mark(log, position.start, position.end) != position.mark
            ):
                before, (state, position) = state, _start(log, name)
                if state != before:
                    yield unit.view(state)
                continue
            if (info.st_size, info.st_mtime_ns, info.st_ctime_ns) == position.seen:
                continue
            before = state
            state, position = _read_on(log, name, unit, state, position)
        if state is not before:
            yield unit.view(state)


def _start(log: BinaryIO, name: str) -> tuple[Plan, _Position]:
    """The current plan, read from the end, and the position after the whole lines."""
    info = os.fstat(log.fileno())
    end, _ = whole_end(log, name, info.st_size)
    plan = plan_before(log, name, end)
    return plan, _position(log, info, end)


def _read_on(
    log: BinaryIO, name: str, unit: TodosProjection, state: Plan, position: _Position
) -> tuple[Plan, _Position]:
    """Apply the whole lines appended after ``position``; a torn last line waits."""
    info = os.fstat(log.fileno())
    end, _ = whole_end(log, name, info.st_size)
    offset = position.end
    log.seek(offset)
    while offset < end:
        line = log.readline(end - offset)
        event = parse_event(line) if line.endswith(b"\n") else None
        if event is None:
            raise invalid_line(name, line_number(log, offset))
        if event["type"] == EVENT_TYPE:
            checked_write(event, name, log, offset)
        state = unit.apply(state, event)
        offset += len(line)
    return state, _position(log, info, end)


def _position(log: BinaryIO, info: os.stat_result, end: int) -> _Position:
    start = line_start(log, end)
    return _Position(
        identity=(info.st_dev, info.st_ino),
        end=end,
        start=start,
        mark=_mark(log, start, end),
        seen=(info.st_size, info.st_mtime_ns, info.st_ctime_ns),
    )


def _mark(log: BinaryIO, start: int, end: int) -> bytes:
    if end - start <= 2 * MARK:
        log.seek(start)
        return log.read(end - start)
    log.seek(start)
    head = log.read(MARK)
    log.seek(end - MARK)
    return head + log.read(MARK)
