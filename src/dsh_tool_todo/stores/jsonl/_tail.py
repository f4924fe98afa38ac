"""Reading a JSONL log from its end, and following it: the reads every reader is built on.

:func:`read_events` reads a whole log; :func:`current_plan`,
:func:`read_snapshot` and :func:`read_tail` read back from the end only as far
as they need. The one follower of a growing log is :class:`_Tail`, driven by a
sync loop (:func:`follow_plan`, what ``watch`` draws) or an async one
(:meth:`~dsh_tool_todo.stores.jsonl.JsonlReader.follow`).

:class:`_Tail` is where a follower stands: the file, held open, the end of the
whole lines it consumed, the seq of the last of them, and a digest of that
line (of its first and last :data:`MARK` bytes, when longer). Holding the
file keeps its inode from being handed to a log created again under the same
name (ext4 and tmpfs reuse a freed inode at once), so such a log is always
told from the one read so far. It keeps no bytes between reads, so a line still
being written (or torn and later cut off) is never glued onto another, and it
remembers how far the unfinished last line has been searched for its newline,
so a long torn tail is read once, not at every poll.

A look costs one ``stat``; while the size, mtime and ctime stay the same it
reads nothing. When they change it reads on from where it stopped, and
reports the log *replaced* when the file is another one (inode), shrank below
what was consumed, was deleted, no longer holds the last line consumed, goes
on with a seq that is not above the last one, or was written at the size it
had (an append always grows a log: ``cp`` over it, the same inode and size,
changes its mtime alone; a touch is a replacement too, read again to the same
plan). Every line read is checked
as ``dsh-todo show`` checks it, and every ``todo/write`` by the one deciding-
event check, naming the path and line.
"""

from __future__ import annotations

import hashlib
import io
import math
import os
from collections.abc import Callable, Collection, Iterable, Iterator
from typing import BinaryIO

from ...core.contract import EVENT_TYPE, SESSION_END_EVENT_TYPE
from ...core.links import End, end_of
from ...core.projection import PLAN_EVENTS, Plan, TodosProjection
from ...protocols import Snapshot, TailPage
from . import _lines
from ._lines import (
    LINE_START,
    Event,
    checked,
    end_before,
    events_backwards,
    events_forward,
    invalid_line,
    line_number,
    line_start,
    looks_torn,
    open_log,
    warn_torn,
    whole_end,
)

TAIL_SCAN = 1 << 20
"""Bytes of a log a page filtered by type reads at most; it then answers a cursor."""
MARK = 32 << 10
"""Bytes read from each end of the last line consumed (a shorter line: all of it) to tell that
the file still holds it; a digest of them is kept."""
READ_BUDGET = 8 << 20
"""Bytes of whole lines one read takes at most; the next read goes on at once."""

_PLANS = TodosProjection()  # the fold of the deciding events; it holds no state


class _Tail:
    """How far a follower has read one log, and the reads that go on from there."""

    def __init__(
        self, path: str, file: BinaryIO, info: os.stat_result, end: int, last_seq: int
    ) -> None:
        self.path = path
        self.file = file  # held until close(): its inode cannot be reused while it is open
        self.identity = (info.st_dev, info.st_ino)
        self.end = end  # the end of the whole lines consumed
        self.last_seq = last_seq
        self.searched = end  # bytes from end to here hold no newline
        self.seen: tuple[int, int, int] | None = None  # (size, mtime, ctime) of the last read
        self.more = False  # the last read stopped at its budget: read again at once
        self._remember_last_line(file)

    @classmethod
    def at_end(cls, path: str) -> tuple[Event | None, _Tail]:
        """The deciding event of the log at ``path`` and a tail at the end of its whole lines."""
        file = open_log(path)
        try:
            info = os.fstat(file.fileno())
            end, _ = whole_end(file, path, info.st_size)
            last_seq, deciding = deciding_before(file, path, end)
            tail = cls(path, file, info, end, last_seq)
        except BaseException:
            file.close()
            raise
        tail.searched = info.st_size  # whole_end found no newline after end
        tail.seen = (info.st_size, info.st_mtime_ns, info.st_ctime_ns)
        return deciding, tail

    @classmethod
    def after_seq(cls, path: str, after: int) -> _Tail:
        """A tail whose next read yields every event with a seq above ``after``."""
        file = open_log(path)
        try:
            info = os.fstat(file.fileno())
            end, _ = whole_end(file, path, info.st_size)
            start = end_before(file, path, end, after + 1)
            for offset, event in events_backwards(file, path, start):
                if event["seq"] <= after:
                    break
                start = offset
            return cls(path, file, info, start, after)
        except BaseException:
            file.close()
            raise

    @classmethod
    def at(cls, path: str, since: Snapshot) -> _Tail | None:
        """A tail where the snapshot ``since`` was read, or ``None`` when the log there no
        longer gives that snapshot at that offset (replaced, cut short, or created again,
        maybe on the same inode, between the snapshot and now)."""
        assert since.position is not None
        inode, end = since.position
        file = open_log(path)
        try:
            info = os.fstat(file.fileno())
            if info.st_ino != inode or info.st_size < end:
                file.close()
                return None
            if end > 0:
                file.seek(end - 1)
                if file.read(1) != b"\n" or deciding_before(file, path, end) != (
                    since.last_seq,
                    since.deciding,
                ):
                    file.close()
                    return None
            return cls(path, file, info, end, since.last_seq)
        except BaseException:
            file.close()
            raise

    def close(self) -> None:
        """Let go of the file (a tail is not read after this)."""
        self.file.close()

    def __del__(self) -> None:
        # A tail dropped unclosed (its follower never finalized, or handed back by a worker
        # thread to a task cancelled meanwhile) lets go of its file when collected, quietly.
        file = getattr(self, "file", None)
        if file is not None:
            file.close()

    def look(self) -> int | None:
        """One ``stat``: ``None`` if the log was replaced or deleted, 0 if nothing changed,
        else about how many bytes a :meth:`read` would look at."""
        try:
            info = os.stat(self.path)
        except FileNotFoundError:
            return None
        if (info.st_dev, info.st_ino) != self.identity or info.st_size < self.end:
            return None
        if (info.st_size, info.st_mtime_ns, info.st_ctime_ns) == self.seen and not self.more:
            return 0
        return max(1, info.st_size - self.searched)

    def read(self) -> list[Event] | None:
        """The events appended since the last read, in order (a torn last line waits for its
        newline); ``None`` if the log no longer continues the one read so far."""
        try:
            named = os.stat(self.path)
        except FileNotFoundError:
            return None
        if (named.st_dev, named.st_ino) != self.identity:
            return None
        file = self.file  # the file read so far, held open
        file.seek(0, os.SEEK_END)  # drops what the buffer holds: a writer may have cut a line
        info = os.fstat(file.fileno())
        if info.st_size < self.end:
            return None
        if self._rewritten(info) or self._last_line(file) != self._mark:
            return None
        self.seen = (info.st_size, info.st_mtime_ns, info.st_ctime_ns)
        if info.st_size < self.searched or self.searched - self.end <= _lines.BLOCK_SIZE:
            # A writer reopening the log cuts a torn line off and appends anew: its
            # newline may lie in bytes already searched. Only a long unfinished line,
            # which nobody cut, is searched from where the last search stopped.
            self.searched = self.end
        stop, scanned = _last_newline_after(
            file, self.searched, info.st_size, self.end + READ_BUDGET
        )
        self.more = scanned < info.st_size
        events: list[Event] = []
        if stop is not None:
            for offset, event in events_forward(file, self.path, self.end, stop):
                if event["seq"] <= self.last_seq:
                    return None
                if event["type"] == EVENT_TYPE:
                    checked(event, self.path, file, offset)
                self.last_seq = event["seq"]
                events.append(event)
            self.end = stop
            self._remember_last_line(file)
        if scanned > self.end and (stop is not None or self.searched == self.end):
            self._check_torn(file)  # the start of the unfinished line, once
        self.searched = scanned
        return events

    def poll(self) -> list[Event] | None:
        """:meth:`look`, then :meth:`read` if anything changed."""
        new = self.look()
        if new is None:
            return None
        return [] if new == 0 else self.read()

    def _rewritten(self, info: os.stat_result) -> bool:
        """Whether the file was written since the last read without growing: an append grows
        it, so what kept its size (``cp`` of a log as long) wrote over what was read."""
        return (
            self.seen is not None
            and info.st_size == self.seen[0]
            and info.st_mtime_ns != self.seen[1]
        )

    def _check_torn(self, file: BinaryIO) -> None:
        file.seek(self.end)
        if not looks_torn(file.read(len(LINE_START))):
            raise invalid_line(self.path, line_number(file, self.end))

    def _remember_last_line(self, file: BinaryIO) -> None:
        self._start = line_start(file, self.end)
        self._mark = self._last_line(file)

    def _last_line(self, file: BinaryIO) -> bytes:
        """A digest of the last line consumed (of its first and last :data:`MARK` bytes, when
        longer): a plan rewritten in the middle of the line is told, not only at its ends."""
        start, end = self._start, self.end
        file.seek(start)
        if end - start <= 2 * MARK:
            line = file.read(end - start)
        else:
            line = file.read(MARK)
            file.seek(end - MARK)
            line += file.read(MARK)
        return hashlib.blake2b(line, digest_size=16).digest()


def _last_newline_after(
    file: BinaryIO, start: int, size: int, enough: int
) -> tuple[int | None, int]:
    """The offset just after the last newline in ``start:size`` (``None``: none) and how far
    it looked (no newline lies between the two): it stops at the first block past
    ``enough`` once it has found one."""
    chunk = 16 * _lines.BLOCK_SIZE
    found: int | None = None
    position = start
    file.seek(start)
    while position < size:
        block = file.read(min(chunk, size - position))
        if not block:
            break
        newline = block.rfind(b"\n")
        if newline >= 0:
            found = position + newline + 1
        position += len(block)
        if found is not None and position >= enough:
            break
    return found, position


def deciding_before(file: BinaryIO, path: str, end: int) -> tuple[int, Event | None]:
    """The seq of the last whole line before ``end`` (-1: none) and the latest deciding event
    (``todo/write`` or ``turn/start``) at or before it, checked; read backwards to it."""
    last_seq = -1
    for offset, event in events_backwards(file, path, end):
        if last_seq < 0:
            last_seq = event["seq"]
        if event["type"] in PLAN_EVENTS:
            return last_seq, checked(event, path, file, offset)
    return last_seq, None


def _summary_before(
    file: BinaryIO, path: str, end: int, walked: Iterable[tuple[int, Event]] | None = None
) -> tuple[int, Event | None, End | None]:
    """:func:`deciding_before`, and the end when the newest of the plan events and
    ``session/end`` events is an end: the ends newer than the plan lie on the same read back
    (``walked``: that read back, already made, each plan event on it checked already)."""
    last_seq, ended, told = -1, None, False
    for offset, event in events_backwards(file, path, end) if walked is None else walked:
        if last_seq < 0:
            last_seq = event["seq"]
        if event["type"] in PLAN_EVENTS:
            return last_seq, checked(event, path, file, offset) if walked is None else event, ended
        if not told and event["type"] == SESSION_END_EVENT_TYPE:
            told, ended = True, end_of(event)
    return last_seq, None, ended


def plan_of(deciding: Event | None) -> Plan:
    """The plan a deciding event leaves (``None``: no event, no plan)."""
    return _PLANS.init if deciding is None else _PLANS.apply(_PLANS.init, deciding)


REAPPEAR_SECONDS = 2.0
"""How long a follower waits for a log that was removed to be written again (a rotation that
deletes, then creates) before it says the log is gone."""


def _reopened(
    name: str, interval: float, sleep: Callable[[float], None]
) -> tuple[Event | None, _Tail]:
    """The log at ``name`` again, after it was replaced: when it was removed rather than
    renamed over, the new one may not be there yet."""
    looks = max(1, math.ceil(REAPPEAR_SECONDS / interval))
    for _ in range(looks):
        try:
            return _Tail.at_end(name)
        except FileNotFoundError:
            sleep(interval)
    return _Tail.at_end(name)


def follow_plan(
    path: str | os.PathLike[str],
    *,
    interval: float,
    sleep: Callable[[float], None],
    also: Collection[str] = (),
) -> Iterator[Plan]:
    """Yield the current plan, then each new one as events are appended, forever; with
    ``also``, the same plan again after appended events of those types (and none newer of
    the plan's).

    Starts from the end of the file, so following a long log costs nothing up
    front; a line still being written waits for its newline. When the log is
    replaced it starts over from the current plan, read from the end, never
    from byte 0; a log removed and written again within ``REAPPEAR_SECONDS``
    is a replaced log too (after that, :class:`FileNotFoundError`). Raises
    :class:`~dsh_tool_todo.errors.InvalidLog` for what ``show`` refuses (a line
    that is not an event, an invalid ``todo/write``, a tail that is no torn
    append) and for what is not a regular file.
    """
    name = os.fspath(path)
    deciding, tail = _Tail.at_end(name)
    try:
        plan = plan_of(deciding)
        yield plan
        while True:
            if not tail.more:
                sleep(interval)
            events = tail.poll()
            if events is None:
                before = plan
                tail.close()
                deciding, tail = _reopened(name, interval, sleep)
                plan = plan_of(deciding)
                if plan != before or also:  # a log of its own: what it asked may differ too
                    yield plan
                continue
            changes = [event for event in events if event["type"] in PLAN_EVENTS]
            if changes:
                plan = plan_of(changes[-1])
                yield plan
            elif also and any(event["type"] in also for event in events):
                yield plan
    finally:
        tail.close()


def read_events(path: str | os.PathLike[str]) -> list[Event]:
    """Every whole event of the log at ``path``, in order, read in full into a list.

    Every line must be an event; :func:`~dsh_tool_todo.core.projection.replay`
    checks the ``todo/write`` events among them.
    """
    name = os.fspath(path)
    with open_log(name) as file:
        end, torn = whole_end(file, name, os.fstat(file.fileno()).st_size)
        events = [event for _, event in events_forward(file, name, 0, end)]
    if torn:
        warn_torn(name, end, "ignored", stacklevel=3)
    return events


def current_plan(path: str | os.PathLike[str]) -> Plan:
    """The plan :func:`~dsh_tool_todo.core.projection.replay` would give, read from the end.

    It reads back only as far as the latest ``todo/write`` or ``turn/start``,
    so its cost does not grow with the log; only the lines it reads are
    checked (:func:`read_events` reads them all).
    """
    name = os.fspath(path)
    with open_log(name) as file:
        end, torn = whole_end(file, name, os.fstat(file.fileno()).st_size)
        if torn:
            warn_torn(name, end, "ignored", stacklevel=3)
        return plan_of(deciding_before(file, name, end)[1])


def read_snapshot(path: str) -> Snapshot:
    """The newest seq and the deciding event of the log at ``path``, and where they were read."""
    with open_log(path) as file:
        end, _ = whole_end(file, path, os.fstat(file.fileno()).st_size)
        last_seq, deciding = deciding_before(file, path, end)
        return Snapshot(last_seq, deciding, (os.fstat(file.fileno()).st_ino, end))


def read_tail(path: str, before: int | None, limit: int, types: Collection[str] | None) -> TailPage:
    """The last ``limit`` events (of ``types``) with a seq below ``before``, oldest first.

    The start is found by bisection; a page filtered by type stops after
    :data:`TAIL_SCAN` bytes and answers the cursor to go on from. Every
    ``todo/write`` it returns is checked.
    """
    picked: list[Event] = []
    with open_log(path) as file:
        end, _ = whole_end(file, path, os.fstat(file.fileno()).st_size)
        start = end if before is None else end_before(file, path, end, before)
        for offset, event in events_backwards(file, path, start):
            seq = event["seq"]
            if before is not None and seq >= before:
                continue
            if types is None or event["type"] in types:
                if len(picked) == limit:
                    return TailPage(picked[::-1], more=True, cursor=picked[-1]["seq"])
                picked.append(checked(event, path, file, offset))
            if types is not None and start - offset >= TAIL_SCAN and offset > 0:
                return TailPage(picked[::-1], more=True, cursor=seq)
    return TailPage(picked[::-1], more=False)


HEAD_READ = 16 << 10
"""Bytes at the head of a log where its link is looked for: a link the stores write (a parent
and a call id of at most ``links.MAX_KEY_CHARS`` characters each, at most 6 bytes a character
as JSON) is shorter; a longer first line is no link."""


def _head_event(first: bytes) -> Event | None:
    end = first.find(b"\n")
    if end < 0:
        return None
    return _lines.parse_event(first[: end + 1])


def read_summary(path: str) -> tuple[Snapshot, Event | None, End | None]:
    """:func:`read_snapshot` of the log at ``path``, its first event when that is a whole line
    of at most :data:`HEAD_READ` bytes (where ``links.link_of`` finds a link) and how its run
    ended (``None``: not ended), through one open: what a list shows of a log. A log shorter
    than :data:`HEAD_READ` is read in one call."""
    with open_log(path) as file:
        info = os.fstat(file.fileno())
        first = file.read(HEAD_READ)
        whole = len(first) < HEAD_READ  # the read met the end: these bytes are the log
        source: BinaryIO = io.BytesIO(first) if whole else file
        size = len(first) if whole else info.st_size
        end, _ = whole_end(source, path, size)
        last_seq, deciding, ended = _summary_before(source, path, end)
        return Snapshot(last_seq, deciding, (info.st_ino, end)), _head_event(first), ended
