"""The byte level of a JSON Lines session log: opening, torn tails, lines both ways, parsing.

A crash can tear only the line being written, so readers drop a torn last
line (with :class:`TornTailWarning`) and keep every line before it. Bytes
after the last newline count as torn only if they can be the start of a line
this library writes (a prefix of ``{"seq":``, then anything) or are all NUL;
anything else, like any line that is not an event ``{seq, type, data}``, means
the file is not such a log, and raises :class:`InvalidLog` naming the path and
line. Lines are split on ``b"\\n"`` only; the text in them is UTF-8.

Every reader opens the path without blocking and refuses what is not a
regular file (a FIFO, a device, a directory), and judges a torn tail by its
first bytes, so its memory stays bounded however long the tail is.

:func:`loads_line` is ``json.loads`` of one line with less work per line (see
its docstring and docs/benchmarks.md). The event helpers below are the only
loops over a log's lines: every reader of this package is built on them, and
every error they raise names the path and the line (``path, line N``).
"""

from __future__ import annotations

import errno
import io
import json
import os
import stat
import warnings
from collections.abc import Callable, Iterator
from json.scanner import make_scanner
from typing import Any, BinaryIO

from ...core.projection import checked_deciding
from ...errors import InvalidLog, TornTailWarning

Event = dict[str, Any]
BLOCK_SIZE = 64 * 1024
LINE_START = b'{"seq":'
"""How every line this library writes begins: the only start a torn tail may have."""

# O_NONBLOCK: opening a FIFO must not wait for a writer; it changes nothing for
# a regular file. O_NOCTTY: a terminal named as a log must not become ours.
_READ_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_NOCTTY", 0)
    | getattr(os, "O_BINARY", 0)
)
_SEEK_DATA: int | None = getattr(os, "SEEK_DATA", None)
_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


# The scanner json.loads's default decoder is built with (same options: the defaults).
_scan: Callable[[str, int], tuple[Any, int]] = make_scanner(json.JSONDecoder())  # type: ignore[arg-type]


def loads_line(line: bytes) -> Any:
    """``json.loads(line)``: the same value, or the same kind of error, with less work per line.

    ``json.loads`` of bytes picks the encoding from the first bytes, decodes with
    ``surrogatepass``, skips whitespace around the value and refuses anything
    after it; about a third of its time on a short line goes there. For a line
    that starts with ``{`` and a byte other than NUL and ends with ``}``, that is
    UTF-8, no leading whitespace, and a value that must end at the last
    character, so the scanner ``json.loads`` uses is called straight away. Any
    other line goes through ``json.loads``. Raises :class:`ValueError` (a
    :class:`json.JSONDecodeError` or :class:`UnicodeDecodeError`) or
    :class:`RecursionError`, as ``json.loads`` does.

    Not parsing the lines that cannot hold a deciding event (a byte filter)
    would skip their check as well; a faster parser (pydantic-core's) measured
    slower than this once its stricter refusals are matched. See docs/benchmarks.md.
    """
    if line[:1] != b"{" or line[-1:] != b"}" or line[1:2] == b"\0":
        return json.loads(line)
    text = line.decode("utf-8", "surrogatepass")
    try:
        value, end = _scan(text, 0)
    except StopIteration as stop:
        raise json.JSONDecodeError("Expecting value", text, stop.value) from None
    if end != len(text):
        raise json.JSONDecodeError("Extra data", text, end)
    return value


def open_log(path: str) -> BinaryIO:
    """``path`` opened for reading, at once; :class:`InvalidLog` unless it is a regular file.

    The check is made on the opened descriptor, so the file cannot be swapped
    between the check and the reads.
    """
    fd = os.open(path, _READ_FLAGS)
    try:
        check_regular(fd, path)
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb")


def check_regular(fd: int, path: str) -> None:
    """Raise :class:`InvalidLog` unless ``fd`` is a regular file (``path`` names it)."""
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        raise not_a_file(path, mode)


def not_a_file(path: str, mode: int) -> InvalidLog:
    kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
    return InvalidLog(f"{path}: is {kind}, not a session log")


def whole_end(file: BinaryIO, path: str, size: int) -> tuple[int, bool]:
    """The end of the whole lines among the first ``size`` bytes, and whether a torn tail follows.

    Raises :class:`InvalidLog` if the bytes after the last newline cannot be a
    torn append, so a foreign file is never mistaken for a damaged log. Reads
    the tail in blocks and keeps none of them: memory stays bounded whatever
    its length.
    """
    end, zeros = _last_newline(file, size)
    if end == size or zeros:
        return end, end < size
    file.seek(end)
    if not looks_torn(file.read(len(LINE_START))):
        raise invalid_line(path, line_number(file, end))
    return end, True


def whole_lines_backwards(file: BinaryIO, end: int) -> Iterator[tuple[int, bytes]]:
    """``(offset, line)`` of the whole lines before ``end`` (just after a newline), last first."""
    lines = lines_backwards(file, end)
    next(lines)  # the empty piece after the final newline
    return lines


def parse_event(line: bytes) -> Event | None:
    """The event a line holds, or ``None`` if it holds none."""
    try:
        event = loads_line(line)  # json.loads, without its per-call work
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

    An append writes ``{"seq":...}\\n`` at once, so a crash leaves a prefix of
    it, or zeros where the file grew before its data reached the disk. Only the
    first bytes decide, so a caller may pass just those.
    """
    if not tail.strip(b"\0"):
        return True
    return tail.startswith(LINE_START) or LINE_START.startswith(tail)


def invalid_line(path: str, number: int) -> InvalidLog:
    return InvalidLog(f"{path}, line {number}: not a session event {{seq, type, data}}")


def warn_torn(path: str, offset: int, fate: str, *, stacklevel: int) -> None:
    message = f"{path}: torn last line at byte {offset} {fate} (a write was cut short)"
    warnings.warn(message, TornTailWarning, stacklevel=stacklevel)


def events_backwards(file: BinaryIO, path: str, end: int) -> Iterator[tuple[int, Event]]:
    """``(offset, event)`` of the whole lines before ``end``, last first; each line checked.

    Raises :class:`InvalidLog` naming the path and line at the first line that
    is not an event.
    """
    for offset, line in whole_lines_backwards(file, end):
        event = parse_event(line)
        if event is None:
            raise invalid_line(path, line_number(file, offset))
        yield offset, event


def events_forward(file: BinaryIO, path: str, start: int, end: int) -> Iterator[tuple[int, Event]]:
    """``(offset, event)`` of the whole lines from ``start`` (a line start) to ``end``, in order.

    ``end`` must follow a newline. Reads 16 blocks at a time; a line longer
    than that is read whole once. Raises :class:`InvalidLog` naming the path and
    line at the first line that is not an event.
    """
    offset = start
    while offset < end:
        file.seek(offset)
        block = file.read(min(16 * BLOCK_SIZE, end - offset))
        cut = block.rfind(b"\n") + 1
        if cut == 0:  # one line longer than the read
            file.seek(offset)
            block = file.readline(end - offset)
            cut = len(block)
            if not block.endswith(b"\n"):
                raise invalid_line(path, line_number(file, offset))
        position = 0
        while position < cut:
            newline = block.index(b"\n", position)
            event = parse_event(block[position:newline])
            if event is None:
                raise invalid_line(path, line_number(file, offset + position))
            yield offset + position, event
            position = newline + 1
        offset += cut


def checked(event: Event, path: str, file: BinaryIO, offset: int) -> Event:
    """``event``, once :func:`~dsh_tool_todo.core.projection.checked_deciding` passes it.

    A failed check is raised naming the path and the line. The line is counted
    only then: counting reads the file up to ``offset``.
    """
    try:
        return checked_deciding(event, path)
    except InvalidLog:
        return checked_deciding(event, f"{path}, line {line_number(file, offset)}")


def end_before(file: BinaryIO, path: str, end: int, seq: int) -> int:
    """A line boundary before which every whole line has a seq below ``seq`` and after
    which (up to ``end``) nearly every one has a seq at or above it.

    Seqs grow by one per line, so the boundary is found by bisecting byte
    offsets: reading a few lines, not the log. What it leaves between the
    boundary and the first line of ``seq`` is at most about a block: a
    backward read from the boundary skips it. Any line it cannot parse stops
    the bisection where it stands; the reader that follows reports it.
    """
    low, high = 0, end
    while high - low > BLOCK_SIZE:
        middle = (low + high) // 2
        file.seek(middle)
        file.readline()  # the rest of the line middle falls in
        start = file.tell()
        if start >= high:
            break
        line = file.readline(high - start)
        event = parse_event(line) if line.endswith(b"\n") else None
        if event is None:
            break
        if event["seq"] >= seq:
            high = start
        else:
            low = start + len(line)
    return high


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
            if pieces:  # the line began in this block and goes on in those after it
                pieces.append(block[newline + 1 : cut])
                yield start + newline + 1, b"".join(reversed(pieces))
                pieces.clear()
            else:  # the usual line, whole in this block: no join
                yield start + newline + 1, block[newline + 1 : cut]
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


def line_start(file: BinaryIO, end: int) -> int:
    """Where the line that ends just before ``end`` (a newline at ``end - 1``) starts."""
    return _last_newline(file, end - 1)[0] if end > 0 else 0


def _last_newline(file: BinaryIO, size: int) -> tuple[int, bool]:
    """The offset just after the last newline before ``size``, and whether all after it is NUL.

    Scans backwards one block at a time and keeps no block, so a tail of any
    length costs one block of memory.
    """
    block_size = BLOCK_SIZE
    zeros = True
    pos = size
    while pos > 0:
        start = max(0, pos - block_size)
        if _is_hole(file, start, pos):  # reads as zeros, and holds no newline
            pos = start
            continue
        file.seek(start)
        block = file.read(pos - start)
        newline = block.rfind(b"\n")
        rest = len(block) - newline - 1
        if zeros and block.count(0, newline + 1) != rest:
            zeros = False
        if newline >= 0:
            return start + newline + 1, zeros
        pos = start
    return 0, zeros


def _is_hole(file: BinaryIO, start: int, end: int) -> bool:
    """Whether ``start:end`` is a hole of a sparse file: no data, zeros when read.

    Lets a tail of gigabytes of holes be judged without reading them. Where
    the file system cannot tell (``SEEK_DATA`` unsupported), nothing is a hole.
    """
    if _SEEK_DATA is None or type(file) is io.BytesIO:  # bytes read already hold no hole
        return False
    try:
        fd = file.fileno()
        here = os.lseek(fd, 0, os.SEEK_CUR)
    except (AttributeError, ValueError, OSError, io.UnsupportedOperation):  # not a descriptor
        return False
    try:
        return os.lseek(fd, start, _SEEK_DATA) >= end
    except OSError as error:  # ENXIO: no data from start to the end of the file
        return error.errno == errno.ENXIO
    finally:
        # put the descriptor back where the buffered file left it: a follower holds its
        # file open, and a buffered read after a moved descriptor reads the wrong bytes
        os.lseek(fd, here, os.SEEK_SET)
