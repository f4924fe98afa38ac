"""Where a person's requests wait for a session's writer, and how the writer takes them.

Each store keeps a session's inbox beside its log, never in it: the log has one
writer, the agent's session. A JSONL log ``x.jsonl`` has ``x.jsonl.requests``, a
file of JSON lines that any number of filers append to (under ``flock``, one
``write`` each, synced); PostgreSQL has the table ``dsh_todo_requests``; a memory
session keeps them in process. An entry is a request (``core.requests.Request``
as JSON) or a withdrawal ``{"withdraw": id, "by": ..., "at": ...}``; its position
is where it ends in the inbox (a byte offset; a row id).

The writer takes the entries after the newest position its log records
(``request/taken`` and ``request/withdrawn`` carry ``inbox``, and a file's inode as
``inboxId``: an inbox deleted or replaced is read from its start), so a restart of
either side loses none and takes none twice. Filers append under the inbox's lock (a
file's ``flock``, a transaction's advisory lock), judging the entries before theirs
there, so the cap on waiting requests holds and a row id never commits behind a later one.
"""

from __future__ import annotations

import contextlib
import fcntl
import inspect
import json
import os
import secrets
import stat
import threading
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from ..core.contract import EVENT_TYPE, REQUEST_TAKEN, REQUEST_WITHDRAWN, TURN_START
from ..core.requests import MAX_BY, MAX_CONTENT, MAX_TOLD, Request, _check_text, _Fold
from ..errors import UsageError

__all__: list[str] = []

Entry = dict[str, Any]
Read = tuple[list[tuple[int, "Entry | None"]], int, "str | None"]
"""What a read of an inbox gives: each whole entry after the position asked for with where it
ends (``None`` for a line that is no entry: passed over), where the read began (0 when the
inbox is not the one the position was in), and the inbox's identity (the name a file's first
line gives it; ``None`` for a table or memory)."""
Admit = Callable[[list[Entry]], None]
POSITION_KEY = "inbox"
IDENTITY_KEY = "inboxId"
TAKEN_TYPES = (REQUEST_TAKEN, REQUEST_WITHDRAWN)
MAX_LINE = 4096  # a request is at most a few hundred characters: a longer line is no entry
ID_DIGITS = 16  # a request's id: secrets.token_hex(8), as filing makes it
MAX_WAITING = 20
"""Requests a session's inbox holds untaken: a filer beyond it is refused until the agent
takes them (or they are withdrawn), so a person cannot flood a model's next request."""


def _admit_all(entries: list[Entry]) -> None:
    """Refuse nothing (a filer that judged the entries already, or a test)."""


class Inbox(Protocol):
    """A session's inbox as filers and readers see it (synchronous)."""

    where: str

    def file(
        self,
        entry: Mapping[str, Any],
        admit: Admit = _admit_all,
        after: tuple[int, str | None] = (0, None),
    ) -> int:
        """Append ``entry`` once ``admit`` (given the entries after ``after``, under the
        inbox's lock, so two filers judge one after the other) has not refused it."""
        ...

    def read_after(self, position: int, identity: str | None = None) -> Read: ...


_READ_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
_FILE_FLAGS = (
    os.O_RDWR
    | os.O_APPEND
    | os.O_CREAT
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_NONBLOCK", 0)
)


class FileInbox:
    """The inbox of the JSONL log ``log``: the file ``log + ".requests"`` beside the file the
    log is (a symlink to a log names the same inbox as the log it leads to: its one writer's)."""

    def __init__(self, log: str) -> None:
        self.where = os.path.realpath(log) + ".requests"

    def file(
        self,
        entry: Mapping[str, Any],
        admit: Admit = _admit_all,
        after: tuple[int, str | None] = (0, None),
    ) -> int:
        line = json.dumps(entry, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
        if len(line) > MAX_LINE:
            raise UsageError(f"a request is at most {MAX_LINE} bytes as JSON")
        fd = os.open(self.where, _FILE_FLAGS, 0o600)
        try:
            _check_regular(fd, self.where)
            fcntl.flock(fd, fcntl.LOCK_EX)
            before, _, _ = _read_fd(fd, *after)
            admit([found for _, found in before if found is not None])
            size = os.fstat(fd).st_size
            if size == 0:  # a new inbox: its first line names it, so a replaced one is told apart
                line = _header() + line
            elif os.pread(fd, 1, size - 1) != b"\n":
                line = b"\n" + line  # a filer died mid-line: end its torn line first
            written = os.write(fd, line)
            if written != len(line):  # a full disk: take the part back, acknowledge nothing
                os.ftruncate(fd, size)
                raise OSError(f"{self.where}: the request was not written whole")
            os.fsync(fd)
            return size + written
        finally:
            os.close(fd)

    def read_after(self, position: int, identity: str | None = None) -> Read:
        try:
            fd = os.open(self.where, _READ_FLAGS)
        except OSError:  # none yet (or a symlink: refused, as filing refuses it)
            return [], 0, None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return [], 0, None  # a FIFO or a directory is no inbox: never waited on
            return _read_fd(fd, position, identity)
        finally:
            os.close(fd)


def _check_regular(fd: int, where: str) -> None:
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        raise UsageError(f"{where} is not a regular file: move it aside to file requests")


def _header() -> bytes:
    return json.dumps({IDENTITY_KEY: secrets.token_hex(8)}).encode() + b"\n"


def _identity(fd: int) -> str | None:
    """The name an inbox file's first line gives it (``None``: none, or not whole yet)."""
    first = os.pread(fd, 64, 0).partition(b"\n")
    try:
        named = json.loads(first[0]) if first[1] else None
    except ValueError:
        return None
    found = named.get(IDENTITY_KEY) if isinstance(named, dict) else None
    return found if isinstance(found, str) else None


def _read_fd(fd: int, position: int, identity: str | None) -> Read:
    """The entries of the open inbox ``fd`` after ``position`` (from its start when the file
    is another than ``identity`` names, or shorter than ``position``: it was replaced)."""
    seen = os.fstat(fd)
    start = max(position, 0)
    named = _identity(fd)
    if (identity is not None and identity != named) or seen.st_size < start:
        start = 0
    data = os.pread(fd, max(seen.st_size - start, 0), start)
    found: list[tuple[int, Entry | None]] = []
    offset = start
    for line in data.split(b"\n")[:-1]:  # the last part has no newline yet: not whole
        offset += len(line) + 1
        found.append((offset, _entry(line)))
    return found, start, named


class MemoryInbox:
    """An in-memory session's inbox: requests filed in this process only."""

    where = "the in-memory session"

    def __init__(self) -> None:
        self._entries: list[Entry] = []
        self._lock = threading.Lock()

    def file(
        self,
        entry: Mapping[str, Any],
        admit: Admit = _admit_all,
        after: tuple[int, str | None] = (0, None),
    ) -> int:
        with self._lock:
            admit(self._entries[max(after[0], 0) :])
            self._entries.append(dict(entry))
            return len(self._entries)

    def read_after(self, position: int, identity: str | None = None) -> Read:
        with self._lock:
            entries = self._entries[max(position, 0) :]
        start = max(position, 0)
        return [(start + n + 1, entry) for n, entry in enumerate(entries)], start, None


def _entry(line: bytes | str) -> Entry | None:
    """The entry a line holds, checked as filing checks it; ``None`` for anything else."""
    if len(line) > MAX_LINE:
        return None
    try:
        value = json.loads(line)
    except (ValueError, RecursionError):
        return None  # a torn or foreign line: passed over, never taken
    if not isinstance(value, dict):
        return None
    if "withdraw" in value:  # a withdrawal, whatever else it holds: judged as one
        return value if _filed_id(value["withdraw"]) else None
    request = Request.from_json(value)
    if request is None or not _filed_id(request.id):
        return None
    try:
        _check_text("content", request.content, MAX_CONTENT)
        _check_text("by", request.by, MAX_BY)
    except UsageError:
        return None
    return value


def _filed_id(ident: object) -> bool:
    """Whether ``ident`` is an id as filing makes them: 16 lowercase hex digits."""
    return (
        isinstance(ident, str)
        and len(ident) == ID_DIGITS
        and ident.isascii()
        and (all(c in "0123456789abcdef" for c in ident))
    )


def waiting_of(entries: list[Entry]) -> list[Request]:
    """The requests of ``entries`` not withdrawn in them, in order."""
    withdrawn = {entry["withdraw"] for entry in entries if "withdraw" in entry}
    found = (Request.from_json(entry) for entry in entries if "withdraw" not in entry)
    return [r for r in found if r is not None and r.id not in withdrawn]


def inbox_of(session: object) -> Inbox | None:
    """The inbox of a store session (``None``: a session of no store of this library)."""
    from .jsonl import JsonlSession
    from .memory import MemorySession

    if isinstance(session, MemorySession):
        return session.requests
    if isinstance(session, JsonlSession):
        return FileInbox(session.path)
    source, session_id = getattr(session, "_source", None), getattr(session, "session_id", None)
    if source is not None and isinstance(session_id, str):
        from .postgres._inbox import PostgresInbox

        return PostgresInbox(source, session_id)
    return None


async def _maybe(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


async def _latest(session: Any, types: tuple[str, ...]) -> Any:
    reader = getattr(session, "alatest", None)
    return await _maybe(reader(types) if reader is not None else session.latest(types))


async def atake_requests(session: Any) -> list[Request]:
    """Take what waits in ``session``'s inbox into its log: the requests the model is to be
    told now, the ones still pending. The caller holds the owner's lock and puts
    :func:`~dsh_tool_todo.plans.reminder.request_notice` of them before the model.

    Each request is one ``request/taken`` event, marked ``told`` when it is to be told: a
    writer that dies between two leaves every request it took told or still in the inbox.
    A request withdrawn before it was taken is passed over, never logged. At most
    :data:`~dsh_tool_todo.core.requests.MAX_TOLD` are taken, the ones one notice names.
    Cheap when nothing waits: the inbox is read after the position this session took last
    (remembered on the session), and the log only once, after the session opened: then the
    inbox is read from its start, once, and what the log took already is left out of it."""
    inbox = inbox_of(session)
    if inbox is None:
        return []
    through = getattr(session, _THROUGH, None)
    entries, start, identity = await _read(session, inbox, *(through or (0, None)))
    if not entries:
        return []
    if through is None:  # this session has taken nothing yet: where did the log stop?
        newest = await _latest(session, TAKEN_TYPES)
        data = newest["data"] if newest is not None else {}
        position, known = data.get(POSITION_KEY), data.get(IDENTITY_KEY)
        if isinstance(position, int) and not isinstance(position, bool):
            known = known if isinstance(known, str) else None
            read = _after((entries, start, identity), position, known)
            entries, start, identity = read or await _read(session, inbox, position, known)
    batch, withdrawals, consumed = _batch(entries, start)
    if not batch and not withdrawals:
        _remember(session, (consumed, identity))
        return []
    fold = _Fold()
    cleared = await _latest(session, (TURN_START,))
    fold.cleared_at = -1 if cleared is None else cleared["seq"]
    deciding = await _latest(session, (EVENT_TYPE, TURN_START))
    if deciding is not None:
        fold.apply(deciding)
    told: list[Request] = []
    where = {IDENTITY_KEY: identity} if identity is not None else {}
    # in inbox order: each event's position says all before it was taken, so a writer that
    # dies between two never leaves a position past an entry it did not log
    for end, entry in sorted([*withdrawals, *batch], key=lambda taken: taken[0]):
        if "withdraw" in entry:
            data = {"id": entry["withdraw"], "by": entry.get("by"), POSITION_KEY: end, **where}
            fold.apply(await _maybe(session.append(REQUEST_WITHDRAWN, data)))
        else:
            request = Request.from_json(entry)
            trial = fold.pending_copy()
            trial.apply({"type": REQUEST_TAKEN, "seq": _UNSEEN, "data": entry})
            tell = request is not None and request.id in trial.pending
            data = {**entry, POSITION_KEY: end, **where, "told": tell}
            fold.apply(await _maybe(session.append(REQUEST_TAKEN, data)))
            if tell and request is not None:
                told.append(request)
        _remember(session, (end, identity))
    _remember(session, (consumed, identity))
    return told


_UNSEEN = 2**62  # a seq no event has: a trial fold's
_THROUGH = "_dsh_requests_through"


def _batch(
    entries: list[tuple[int, Entry | None]], start: int
) -> tuple[list[tuple[int, Entry]], list[tuple[int, Entry]], int]:
    """What one take records, in inbox order: the requests (at most MAX_TOLD, each id once,
    a request withdrawn before it was taken left out with its withdrawal) and the
    withdrawals of requests taken before; and where in the inbox the take ends."""
    batch: dict[str, tuple[int, Entry]] = {}
    withdrawals: list[tuple[int, Entry]] = []
    consumed = start
    for end, entry in entries:
        if entry is not None and "withdraw" in entry:
            if batch.pop(entry["withdraw"], None) is None:
                withdrawals.append((end, entry))
        elif entry is not None and entry["id"] not in batch:
            if len(batch) >= MAX_TOLD:
                break  # the next notice's: the inbox keeps it
            batch[entry["id"]] = (end, entry)
        consumed = end
    return list(batch.values()), withdrawals, consumed


def _after(read: Read, position: int, identity: str | None) -> Read | None:
    """What reading the inbox after ``position`` of the inbox ``identity`` names gives, from
    ``read``, a read from its start; ``None`` when only reading it again can say: an inbox
    other than the log's, or a position that ends no entry read (each store decides then).
    Where an entry read ends, the inbox held that much: a file as long, a row as old."""
    entries, _, named = read
    if identity not in (None, named) or (position != 0 and all(e != position for e, _ in entries)):
        return None
    return [(end, entry) for end, entry in entries if end > position], position, named


def _remember(session: Any, through: tuple[int, str | None]) -> None:
    with contextlib.suppress(AttributeError):  # slots: it reads the log's position each time
        setattr(session, _THROUGH, through)


async def _read(session: Any, inbox: Any, position: int, identity: str | None) -> Read:
    reader = getattr(inbox, "aread_after", None)
    if reader is not None and hasattr(session, "alatest"):
        found: Read = await reader(position, identity)
        return found
    read: Read = inbox.read_after(position, identity)
    return read


def take_requests(session: Any) -> list[Request]:
    """:func:`atake_requests` for a session whose calls are all synchronous."""
    work = atake_requests(session)
    try:
        work.send(None)
    except StopIteration as done:
        taken: list[Request] = done.value
        return taken
    work.close()
    raise UsageError(
        "this session is asynchronous, so its requests were not taken: "
        "call `await atake_requests(session)`"
    )
