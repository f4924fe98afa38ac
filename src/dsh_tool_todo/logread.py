"""Reading a JSON Lines session log: whole from the start, or backwards from its end.

A crash can tear only the line being written, so readers drop a torn last
line (with :class:`TornTailWarning`) and keep every line before it. Any other
line that is not an event ``{seq, type, data}`` means the file is not such a
log, and raises :class:`InvalidLog` naming the path and line.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Iterator
from typing import Any, BinaryIO

from .contract import EVENT_TYPE, TURN_START
from .errors import InvalidLog
from .model import TodoItem
from .projection import check_logged_write

Event = dict[str, Any]
BLOCK_SIZE = 64 * 1024


class TornTailWarning(UserWarning):
    """A log's last line was cut short by a crash: ignored, or cut off on reopening."""


def read_events(path: str | os.PathLike[str]) -> list[Event]:
    """Every whole event of the log at ``path``, in order, read in full into a list."""
    name = os.fspath(path)
    events: list[Event] = []
    offset = 0
    with open(name, "rb") as file:
        for number, line in enumerate(file, 1):
            if not line.endswith(b"\n"):
                if not looks_torn(line):
                    raise invalid_line(name, number)
                warn_torn(name, offset, "ignored", stacklevel=3)
                break
            event = parse_event(line)
            if event is None:
                raise invalid_line(name, number)
            events.append(event)
            offset += len(line)
    return events


def current_plan(path: str | os.PathLike[str]) -> list[TodoItem] | None:
    """The plan :func:`~dsh_tool_todo.projection.replay` would give, read from the end.

    It reads back only as far as the latest ``todo/write`` or ``turn/start``,
    so its cost does not grow with the log; only the lines it reads are
    checked (:func:`read_events` checks them all).
    """
    name = os.fspath(path)
    with open(name, "rb") as file:
        end, tail, lines = split_tail(file, name)
        if tail:
            warn_torn(name, end, "ignored", stacklevel=3)
        for offset, line in lines:
            event = parse_event(line)
            if event is None:
                raise invalid_line(name, line_number(file, offset))
            if event["type"] == TURN_START:
                return None
            if event["type"] == EVENT_TYPE:
                try:
                    check_logged_write(event, event["seq"])
                except InvalidLog as error:
                    where = f"{name}, line {line_number(file, offset)}"
                    raise InvalidLog(f"{where}: {error}") from None
                todos: list[TodoItem] = event["data"]["todos"]
                return todos
    return None


def split_tail(file: BinaryIO, path: str) -> tuple[int, bytes, Iterator[tuple[int, bytes]]]:
    """The size of the whole lines, the torn bytes after them, and the whole lines backwards.

    Raises :class:`InvalidLog` if the bytes after the last newline cannot be a
    torn append, so a foreign file is never mistaken for a damaged log.
    """
    lines = lines_backwards(file, file.seek(0, os.SEEK_END))
    end, tail = next(lines)
    if tail and not looks_torn(tail):
        raise invalid_line(path, line_number(file, end))
    return end, tail, lines


def parse_event(line: bytes) -> Event | None:
    """The event a line holds, or ``None`` if it holds none."""
    try:
        event = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if (
        isinstance(event, dict)
        and type(event.get("seq")) is int
        and isinstance(event.get("type"), str)
        and isinstance(event.get("data"), dict)
    ):
        return event
    return None


def looks_torn(tail: bytes) -> bool:
    """Whether bytes after the last newline can be an append a crash cut short.

    An append writes ``{...}\\n`` at once, so a crash leaves a prefix of it, or
    zeros where the file grew before its data reached the disk.
    """
    if not tail.strip(b"\0"):
        return True
    if not tail.startswith(b"{"):
        return False
    try:
        json.loads(tail)
    except (ValueError, RecursionError):
        return True
    return parse_event(tail) is not None  # a whole event missing only its newline


def invalid_line(path: str, number: int) -> InvalidLog:
    return InvalidLog(f"{path}, line {number}: not a session event {{seq, type, data}}")


def warn_torn(path: str, offset: int, fate: str, *, stacklevel: int) -> None:
    message = f"{path}: torn last line at byte {offset} {fate} (a write was cut short)"
    warnings.warn(message, TornTailWarning, stacklevel=stacklevel)


def lines_backwards(file: BinaryIO, size: int) -> Iterator[tuple[int, bytes]]:
    """Yield ``(offset, line)`` from the last line to the first, without newlines.

    The first pair is always the bytes after the final newline (empty when the
    file ends with one). A line longer than a block is joined once, when its
    start is found.
    """
    block_size = BLOCK_SIZE  # looked up per call, so tests can shrink it
    pieces: list[bytes] = []  # the line being assembled, the piece nearest the end first
    pos = size
    while pos > 0:
        start = max(0, pos - block_size)
        file.seek(start)
        block = file.read(pos - start)
        pos = start
        cut = len(block)
        newline = block.rfind(b"\n", 0, cut)
        while newline >= 0:
            pieces.append(block[newline + 1 : cut])
            yield start + newline + 1, b"".join(reversed(pieces))
            pieces.clear()
            cut = newline
            newline = block.rfind(b"\n", 0, cut)
        pieces.append(block[:cut])
    yield 0, b"".join(reversed(pieces))


def line_number(file: BinaryIO, offset: int) -> int:
    """The 1-based number of the line starting at ``offset``; reads all before it, for errors."""
    file.seek(0)
    number = 1
    remaining = offset
    while remaining > 0:
        chunk = file.read(min(BLOCK_SIZE, remaining))
        if not chunk:
            break
        number += chunk.count(b"\n")
        remaining -= len(chunk)
    return number
