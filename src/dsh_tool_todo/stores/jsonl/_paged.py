"""A list row and the first page of a log's tail from one read: what ``dsh-todo sessions`` reads.

The fleet shows, for each log, its list row (:func:`._tail.read_summary`) and the current
turn's plan events (pages of :func:`._tail.read_tail`). A log shorter than
:data:`._tail.HEAD_READ` is read whole by the row's one read, so the first page comes from
the same bytes, and the row from the page's own walk back over them: each line is parsed
once, by one open and one read. A longer log gets its row as a list reads it, and no page.

The logs are listed as :func:`._index.scan` lists them, but each as a short tuple
(:func:`newest_unread`): a fleet of 100,000 logs is held in a fifth of the memory, and let
go a log at a time as its row is read.
"""

from __future__ import annotations

import io
import os
import stat
from collections.abc import Collection
from pathlib import Path
from typing import BinaryIO

from ...core.projection import PLAN_EVENTS
from ...errors import InvalidLog
from ...protocols import SessionSummary, Snapshot, TailPage
from ._index import SUFFIX, Read, entry, summary_of
from ._lines import (
    _READ_FLAGS,
    Event,
    checked,
    invalid_line,
    not_a_file,
    parse_event,
    whole_end,
)
from ._tail import HEAD_READ, TAIL_SCAN, _head_event, _summary_before, read_summary

__all__: list[str] = []

_PLANS = frozenset(PLAN_EVENTS)

Unread = tuple[float, str, int, "str | None"]
"""A log to read: minus its mtime, its session's name, its size, its path (``None``: the
name's file in the directory)."""


def newest_unread(root: Path, query: str, limit: int) -> list[Unread]:
    """The logs :func:`._index.scan` finds in ``root`` whose name holds ``query``, newest
    first (then by name, as a list sorts them), at most ``limit``; none of them read."""
    found: list[Unread] = []
    needle = query.casefold()
    cut = len(SUFFIX)
    regular = stat.S_ISREG
    with os.scandir(root) as entries:
        for item in entries:  # scan's loop and tests, kept in step by the tests
            file = item.name
            if not file.endswith(SUFFIX) or file[0] == ".":
                continue
            name = file[:-cut]
            if needle and needle not in name.casefold():
                continue
            try:
                link = item.stat(follow_symlinks=False)
            except OSError:
                continue
            if regular(link.st_mode) and name.isascii() and len(name) <= 250 and name:
                if "\\" not in name:
                    found.append((-link.st_mtime, name, link.st_size, None))
                continue
            seen = entry(root, name, item.path, link)
            if seen is not None:
                found.append((-seen.mtime, name, seen.key[1], seen.path))
    found.sort()  # no two names alike: the paths are never compared
    del found[limit:]
    return found


def paged(
    root: str, log: Unread, limit: int, types: Collection[str]
) -> tuple[SessionSummary, TailPage | InvalidLog | None]:
    """The row of ``log`` (as the list gives it, kept nowhere) and the first page of its tail
    (``read_tail(path, None, limit, types)``) from the same read of a short log: the page,
    the :class:`InvalidLog` its read raised, or ``None`` (read it apart)."""
    negative_mtime, name, _, path = log
    read: Read | None
    try:
        read, page = read_summary_and_page(path or os.path.join(root, name + SUFFIX), limit, types)
    except (OSError, InvalidLog):
        read, page = None, None
    return summary_of(name, -negative_mtime, read), page


def read_summary_and_page(
    path: str, limit: int, types: Collection[str]
) -> tuple[Read, TailPage | InvalidLog | None]:
    """:func:`._tail.read_summary` of the log at ``path`` and, for a log shorter than
    :data:`._tail.HEAD_READ`, what ``read_tail(path, None, limit, types)`` answers of the
    same bytes: the page, or the :class:`InvalidLog` it raises (its traceback dropped);
    ``None`` for a longer log. Raises what ``read_summary`` raises."""
    fd = os.open(path, _READ_FLAGS)  # as open_log opens it, without a buffered file
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise not_a_file(path, info.st_mode)
        # one byte more than its size: more came back only if the log grew meanwhile (and a
        # read sized to the log costs half what a HEAD_READ one does, on a fragmented heap)
        first = os.read(fd, info.st_size + 1) if info.st_size < HEAD_READ else None
    finally:
        os.close(fd)
    if first is None or len(first) > info.st_size:  # long, or grown since: as a list reads it
        return read_summary(path), None
    source = io.BytesIO(first)
    end, _ = whole_end(source, path, len(first))
    walked: list[tuple[int, Event]] = []
    page: TailPage | InvalidLog
    try:
        page = _first_page(source, first[:end], path, limit, types, walked)
    except InvalidLog as error:
        page = error.with_traceback(None)  # its frames hold the bytes: let them go now
    # the walk stopped short of the row's facts, or did not check its deciding event
    if isinstance(page, InvalidLog) or page.more or not _PLANS.issubset(types):
        last_seq, deciding, ended = _summary_before(source, path, end)
    else:
        last_seq, deciding, ended = _summary_before(source, path, end, walked)
    # the walk parsed the first line too, when it reached it
    head = walked[-1][1] if walked and walked[-1][0] == 0 else _head_event(first)
    return (Snapshot(last_seq, deciding, (info.st_ino, end)), head, ended), page


def _first_page(
    file: BinaryIO,
    whole: bytes,
    path: str,
    limit: int,
    types: Collection[str],
    walked: list[tuple[int, Event]],
) -> TailPage:
    """``read_tail(path, None, limit, types)`` of a log whose whole lines are ``whole`` (open
    as ``file``), split at once rather than walked back a line at a time; each event is added
    to ``walked`` as (offset, event), newest first, as the walk goes."""
    lines = whole.split(b"\n")
    lines.pop()  # what follows the last newline: nothing
    picked: list[Event] = []
    offset = len(whole)
    for index in range(len(lines) - 1, -1, -1):
        offset -= len(lines[index]) + 1
        event = parse_event(lines[index])
        if event is None:
            raise invalid_line(path, index + 1)
        walked.append((offset, event))
        if event["type"] in types:
            if len(picked) == limit:
                return TailPage(picked[::-1], more=True, cursor=picked[-1]["seq"])
            picked.append(checked(event, path, file, offset))
    return TailPage(picked[::-1], more=False)


assert HEAD_READ < TAIL_SCAN  # a whole short log is within what one filtered page reads
