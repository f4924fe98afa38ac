"""A session log on disk: one JSON event ``{seq, type, data}`` per line, each appended whole.

:class:`JsonlSession` takes :class:`~dsh_tool_todo.host.MemorySession`'s place
in a host; the readers of :mod:`dsh_tool_todo.stores.jsonl` read the file back,
even after a crash. One session at a time may write a given file.

>>> import dsh_tool_todo, tempfile, pathlib
>>> from dsh_tool_todo.host import Host
>>> from dsh_tool_todo.stores.jsonl import current_plan
>>> path = pathlib.Path(tempfile.mkdtemp()) / "agent.jsonl"
>>> host = Host([dsh_tool_todo], {"dsh-tool-todo": {"allowParallelInProgress": False}})
>>> with JsonlSession(path) as session:
...     agent = host.new_agent(session=session)
...     host.call_tool("todo_write", {"todos": [{"content": "Plan", "status": "pending"}]},
...                    agent=agent)
'Updated todo list: 1 pending, 0 in progress, 0 completed.'
>>> current_plan(path)
[{'content': 'Plan', 'status': 'pending'}]
"""

from __future__ import annotations

import json
import os
import stat
import threading
import warnings
from collections.abc import Callable, Collection, Mapping
from typing import Any

from pydantic_core import PydanticSerializationError, to_json

from ...core.contract import CALL_ID_KEY, EVENT_TYPE, LINK_EVENT_TYPE, TURN_START
from ...core.links import decide_link, link_data
from ...core.listeners import Listener, Listeners
from ...errors import LogBusy, LogReplaced, UsageError
from .._calls import call_id_of, call_key
from .._closing import ClosedOnExit
from ._lines import (
    Event,
    check_regular,
    events_backwards,
    events_forward,
    invalid_line,
    line_number,
    not_a_file,
    parse_event,
    warn_torn,
    whole_end,
)

try:
    import fcntl
except ImportError:  # no flock (Windows): such a platform cannot keep the one-writer rule
    fcntl = None  # type: ignore[assignment]

__all__ = ["JsonlSession"]

SUFFIX = ".jsonl"

# pydantic's encoder writes UTF-8 about four times faster than the standard
# library's; only text it cannot encode (lone surrogates a model wrote) takes
# the ASCII-escaping path, so a write never fails on model-written content.
_ESCAPING_ENCODER = json.JSONEncoder(ensure_ascii=True, separators=(",", ":"))
# O_NONBLOCK: a FIFO named as a log is refused at once instead of waiting for a
# reader; on a regular file it changes nothing. os.open's descriptors are not
# inherited by child programs, so neither is the lock.
_OPEN_FLAGS = (
    os.O_RDWR
    | os.O_CREAT
    | os.O_APPEND
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_NOCTTY", 0)
    | getattr(os, "O_BINARY", 0)
)


class JsonlSession(ClosedOnExit):
    """An append-only session log in a JSON Lines file; safe to append from several threads.

    With ``fsync=True`` each :meth:`append` returns only once its event is on
    disk; by default an event is handed to the OS and survives the process
    dying, but not the machine losing power.

    One writer per log: the session holds an exclusive ``flock`` on the file
    from its opening to :meth:`close` (or its collection, or the process's
    death), and a second session on the same file, in this process or
    another, is refused with :class:`~dsh_tool_todo.errors.LogBusy` before it
    reads or changes anything.

    A ``todo/write`` whose ``callId`` was recorded since the last ``turn/start``
    (read from the file at the first such append after opening) records
    nothing: :meth:`append` returns the first one's event.

    An append acknowledges only what a reader of ``path`` can read: when the
    file was deleted, moved or replaced by another since the session opened
    it, the append takes its line back, closes the session and raises
    :class:`~dsh_tool_todo.errors.LogReplaced` (open the log again to go on).
    """

    _fd = -1  # so that a session whose opening failed is collected quietly

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        fsync: bool = False,
        parent: str | None = None,
        parent_call_id: str | None = None,
    ) -> None:
        if parent is None and parent_call_id is not None:
            raise UsageError("parent_call_id names a call of the parent: pass parent= too")
        data = None if parent is None else link_data(parent, parent_call_id)  # before any I/O
        self.path = os.fspath(path)
        self.fsync = fsync
        self._listeners = Listeners()
        self._lock = threading.Lock()
        # Where the current turn's keyed todo/writes start, by call_key (offsets, not events:
        # a long turn must not pin its plans in memory); None until an append needs them.
        self._calls: dict[bytes, int] | None = None
        fd = _open_claimed(self.path)
        try:
            # What the path must still name for an append to be acknowledged; absolute, so
            # that a process changing its working directory does not look elsewhere.
            self._where = os.path.abspath(self.path)
            opened = os.fstat(fd)
            self._inode = (opened.st_ino, opened.st_dev)
            # The next seq and the end of the whole lines, replaced together.
            self._next = self._recover(fd)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        if data is not None:
            try:
                self._link(data)
            except BaseException:
                self.close()
                raise

    @property
    def key(self) -> str:
        """The name a viewer knows this log by: its file name without ``.jsonl``
        (what ``dsh-todo serve DIR`` lists); a child's ``parent``."""
        name = os.path.basename(self.path)
        return name[: -len(SUFFIX)] if name.endswith(SUFFIX) and len(name) > len(SUFFIX) else name

    def link(self, parent: str, *, parent_call_id: str | None = None) -> Event | None:
        """Record that this log works for ``parent`` (see :mod:`dsh_tool_todo.core.links`).

        Returns the link event, or ``None`` when the log records this parent
        already; raises :class:`~dsh_tool_todo.errors.LinkConflict`, writing
        nothing, for a log started for another parent or holding events and no link.
        """
        return self._link(link_data(parent, parent_call_id))

    def _link(self, data: dict[str, str]) -> Event | None:
        # Link a session before handing it out: an append from another thread between the
        # decision and the link's append would put the link past the head.
        with self._lock:
            fd = self._fd
            if fd < 0:
                raise UsageError(f"{self.path}: the session log is closed")
            head = None
            if self._next[0] > 0:
                with open(fd, "rb", closefd=False) as file:
                    first = next(events_forward(file, self.path, 0, self._next[1]), None)
                head = None if first is None else first[1]
            if not decide_link(self.path, head, self._next[0], data):
                return None
        return self.append(LINK_EVENT_TYPE, data)

    @property
    def closed(self) -> bool:
        return self._fd < 0

    def append(self, type: str, data: Mapping[str, Any], /) -> Event:
        key = None if call_id_of(type, data) is None else call_key(data)
        with self._lock:  # one line at a time, and listeners see events in log order
            fd = self._fd
            if fd < 0:
                raise UsageError(f"{self.path}: the session log is closed")
            calls = self._calls
            if key is not None:
                if calls is None:
                    calls = self._calls = self._turn_calls(fd)
                if key in calls:  # same id and list as a call of this turn: a retry
                    return self._event_at(fd, calls[key])
            seq, end = self._next
            event: Event = {"seq": seq, "type": type, "data": data}
            line = _encode_line(event)
            try:
                _write_all(fd, line)
                if self.fsync:
                    os.fsync(fd)
                lost = _unnamed(self._where, self._inode)
                if lost is None:
                    self._next = (seq + 1, end + len(line))  # one store: recorded, or not
            except BaseException:
                self._calls = None  # recorded or not, the file says: read it again if asked
                if self._next[0] == seq:  # not recorded: take back what reached the file
                    self._discard(fd, end, len(line))
                raise
            if lost is not None:  # written where no reader of the path will find it
                self._discard(fd, end, len(line))
                if self._fd == fd:  # not closed by _discard already
                    self._fd = -1
                    os.close(fd)
                raise LogReplaced(
                    f"{self.path}: the log was {lost} since this session opened it: nothing "
                    "was recorded, and the session is closed (open the log again to go on)"
                )
            if type == TURN_START:
                self._calls = {}
            elif key is not None and calls is not None:  # read above, for this call
                calls.setdefault(key, end)
            self._listeners.notify(event)
        return event

    def subscribe(self, listener: Listener, /) -> Callable[[], None]:
        return self._listeners.add(listener)

    def latest(self, types: Collection[str], /) -> Event | None:
        """The newest event whose type is in ``types``, or ``None``: read backwards from the end.

        Raises :class:`~dsh_tool_todo.errors.InvalidLog`, naming the path and
        line, for a line it reads that is not an event.
        """
        if isinstance(types, str):
            raise UsageError(f"types must be a collection of event types, not the str {types!r}")
        with self._lock:
            fd = self._fd
            if fd < 0:
                raise UsageError(f"{self.path}: the session log is closed")
            with open(fd, "rb", closefd=False) as file:  # appends ignore the read offset
                for _, event in events_backwards(file, self.path, self._next[1]):
                    if event["type"] in types:
                        return event
        return None

    def _turn_calls(self, fd: int) -> dict[bytes, int]:
        """Where each keyed ``todo/write`` of the current turn starts (by call_key), from the end.

        Read once, at the first append with a call id, so opening stays cheap and
        a log written without call ids is never read: back to the last
        ``turn/start``, which is as far as a recovery that replays a whole run
        can repeat a call.
        """
        calls: dict[bytes, int] = {}
        with open(fd, "rb", closefd=False) as file:
            for offset, event in events_backwards(file, self.path, self._next[1]):
                kind = event["type"]
                if kind == TURN_START:
                    break
                data = event["data"]
                if kind == EVENT_TYPE and isinstance(data, Mapping):
                    call = data.get(CALL_ID_KEY)
                    if isinstance(call, str):
                        calls[call_key(data)] = offset  # read backwards: the first one wins
        return calls

    def _event_at(self, fd: int, offset: int) -> Event:
        """The event of the whole line at ``offset``: a repeated call's first append."""
        with open(fd, "rb", closefd=False) as file:
            file.seek(offset)
            line = file.readline(self._next[1] - offset)
            event = parse_event(line[:-1]) if line.endswith(b"\n") else None
            if event is None:  # the file changed under the session
                raise invalid_line(self.path, line_number(file, offset))
        return event

    def close(self) -> None:
        """Close the file, which releases the log to the next writer; closing twice is fine."""
        with self._lock:
            fd, self._fd = self._fd, -1
            if fd >= 0:
                os.close(fd)

    def __del__(self, _close: Callable[[int], None] = os.close) -> None:
        # As Python's own files do: release the descriptor (and so the lock), then warn.
        fd, self._fd = self._fd, -1
        if fd >= 0:
            _close(fd)
            message = f"unclosed session log {self.path!r}"
            warnings.warn(message, ResourceWarning, stacklevel=2, source=self)

    def _discard(self, fd: int, end: int, length: int) -> None:
        """Cut off what a failed append wrote past ``end``, or close the session.

        Only bytes this session wrote are ever cut: the file's size (not a
        counter an interrupt may have left behind) says how much reached it,
        and if that is more than the line, or the file is shorter than the
        whole lines, another program changed it and the session closes
        instead. Reopening then keeps every whole line and cuts a torn one.
        """
        try:
            size = os.fstat(fd).st_size
            if size == end:
                return
            if end < size <= end + length:
                os.ftruncate(fd, end)
                return
        except BaseException:  # an interrupt or error here: the session closes
            pass
        self._fd = -1
        os.close(fd)

    def _recover(self, fd: int) -> tuple[int, int]:
        """The next seq and the size of the whole lines, after cutting off a torn tail."""
        with open(fd, "rb", closefd=False) as file:
            end, torn = whole_end(file, self.path, os.fstat(fd).st_size)
            last = next(events_backwards(file, self.path, end), None)
            seq = 0 if last is None else last[1]["seq"] + 1
        if torn:
            os.ftruncate(fd, end)
            if self.fsync:
                os.fsync(fd)
            warn_torn(self.path, end, "cut off", stacklevel=4)
        elif end == 0 and self.fsync:
            _fsync_directory(self.path)  # a new file is durable only once its name is
        return seq, end


def _open_claimed(path: str) -> int:
    """``path`` opened for appending and locked for this session alone, or an error.

    Refuses what is not a regular file, and a file another session holds,
    before anything is read or cut off.
    """
    if fcntl is None:
        raise UsageError(f"{path}: cannot lock the log on this platform (no flock): not opened")
    try:
        fd = os.open(path, _OPEN_FLAGS, 0o666)
    except IsADirectoryError:
        raise not_a_file(path, stat.S_IFDIR) from None
    try:
        check_regular(fd, path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise LogBusy(
                f"{path}: another session is writing this log (one writer per log)"
            ) from None
        except OSError as error:  # a filesystem without flock: the rule cannot be kept
            raise UsageError(
                f"{path}: cannot lock the log ({error.strerror}): not opened"
            ) from None
    except BaseException:
        os.close(fd)
        raise
    return fd


def _unnamed(where: str, inode: tuple[int, int]) -> str | None:
    """Why ``where`` no longer names the file the session writes, or ``None`` if it does.

    One ``stat`` per append (about 1 us after a write; an ``fstat`` for the link count
    alone costs nearly as much and misses a move): a log deleted (``rm``, its directory
    removed whole) or replaced keeps taking appends on its old inode, which no reader sees.
    """
    try:
        now = os.stat(where)
    except FileNotFoundError:
        return "deleted or moved"
    except OSError as error:  # a directory on the path made a file, or made unreadable
        return f"put out of reach ({error.strerror})"
    if now.st_ino != inode[0] or now.st_dev != inode[1]:
        return "replaced by another file"
    return None


def _write_all(fd: int, line: bytes) -> None:
    written = os.write(fd, line)
    while written < len(line):  # a short write: a full disk, or a signal
        written += os.write(fd, line[written:])


def _encode_line(event: Event) -> bytes:
    try:
        return to_json(event) + b"\n"
    except PydanticSerializationError:
        return (_ESCAPING_ENCODER.encode(event) + "\n").encode("ascii")


def _fsync_directory(path: str) -> None:
    if os.name != "posix":  # directories cannot be opened for fsync elsewhere
        return
    fd = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
