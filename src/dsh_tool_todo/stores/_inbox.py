"""Where a person's requests wait for a session's writer, and how the writer takes them.

Each store keeps a session's inbox beside its log, never in it: the log has one
writer, the agent's session. A JSONL log ``x.jsonl`` has ``x.jsonl.requests``, a
file of JSON lines that any number of filers append to (under ``flock``, one
``write`` each, synced); PostgreSQL has the table ``dsh_todo_requests``; a memory
session keeps them in process. An entry is a request (``core.requests.Request``
as JSON) or a withdrawal ``{"withdraw": id, "by": ..., "at": ...}``; its position
is where it ends in the inbox (a byte offset; a row id).

The writer takes the entries after the newest position its log records
(``request/taken`` and ``request/withdrawn`` carry ``inbox``), so a restart of
either side loses none and takes none twice.
"""

from __future__ import annotations

import contextlib
import fcntl
import inspect
import json
import os
import threading
from collections.abc import Mapping
from typing import Any, Protocol

from ..core.contract import (
    EVENT_TYPE,
    REQUEST_NOTIFIED,
    REQUEST_TAKEN,
    REQUEST_WITHDRAWN,
    TURN_START,
)
from ..core.requests import MAX_TOLD, Request, _Fold
from ..errors import UsageError

__all__: list[str] = []

Entry = dict[str, Any]
POSITION_KEY = "inbox"
TAKEN_TYPES = (REQUEST_TAKEN, REQUEST_WITHDRAWN)
MAX_LINE = 4096  # a request is at most a few hundred characters: a longer line is no entry
MAX_WAITING = 20
"""Requests a session's inbox holds untaken: a filer beyond it is refused until the agent
takes them (or they are withdrawn), so a person cannot flood a model's next request."""


class Inbox(Protocol):
    """A session's inbox as filers and readers see it (synchronous)."""

    where: str

    def file(self, entry: Mapping[str, Any]) -> int: ...

    def read_after(self, position: int) -> list[tuple[int, Entry]]: ...


class FileInbox:
    """The inbox of the JSONL log ``log``: the file ``log + ".requests"``."""

    def __init__(self, log: str) -> None:
        self.where = log + ".requests"

    def file(self, entry: Mapping[str, Any]) -> int:
        line = json.dumps(entry, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
        if len(line) > MAX_LINE:
            raise UsageError(f"a request is at most {MAX_LINE} bytes as JSON")
        flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
        fd = os.open(self.where, flags, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                line = b"\n" + line  # a filer died mid-line: end its torn line first
            written = os.write(fd, line)
            if written != len(line):  # a full disk: take the part back, acknowledge nothing
                os.ftruncate(fd, size)
                raise OSError(f"{self.where}: the request was not written whole")
            os.fsync(fd)
            return size + written
        finally:
            os.close(fd)

    def read_after(self, position: int) -> list[tuple[int, Entry]]:
        try:
            with open(self.where, "rb") as file:
                file.seek(max(position, 0))
                data = file.read()
        except FileNotFoundError:
            return []
        found: list[tuple[int, Entry]] = []
        offset = max(position, 0)
        for line in data.split(b"\n")[:-1]:  # the last part has no newline yet: not whole
            offset += len(line) + 1
            entry = _entry(line)
            if entry is not None:
                found.append((offset, entry))
        return found


class MemoryInbox:
    """An in-memory session's inbox: requests filed in this process only."""

    where = "the in-memory session"

    def __init__(self) -> None:
        self._entries: list[Entry] = []
        self._lock = threading.Lock()

    def file(self, entry: Mapping[str, Any]) -> int:
        with self._lock:
            self._entries.append(dict(entry))
            return len(self._entries)

    def read_after(self, position: int) -> list[tuple[int, Entry]]:
        with self._lock:
            entries = self._entries[max(position, 0) :]
        start = max(position, 0)
        return [(start + n + 1, entry) for n, entry in enumerate(entries)]


def _entry(line: bytes) -> Entry | None:
    if len(line) > MAX_LINE:
        return None
    try:
        value = json.loads(line)
    except (ValueError, RecursionError):
        return None  # a torn or foreign line: skipped, never taken
    if not isinstance(value, dict):
        return None
    if Request.from_json(value) is not None:
        return value
    if isinstance(value.get("withdraw"), str):
        return value
    return None


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
    """Take what waits in ``session``'s inbox into its log, and mark as told the requests the
    model is to be told now: the ones still pending. The caller holds the owner's lock and
    puts :func:`~dsh_tool_todo.plans.reminder.request_notice` of them before the model.

    Cheap when nothing waits: an inbox that is empty past the position this session took
    last (remembered on the session) costs one read of the inbox, not of the log."""
    inbox = inbox_of(session)
    if inbox is None:
        return []
    position = getattr(session, _THROUGH, None)
    entries = await _read(session, inbox, position or 0)
    if not entries:
        return []
    if position is None:  # this session has taken nothing yet: where did the log stop?
        newest = await _latest(session, TAKEN_TYPES)
        through = newest["data"].get(POSITION_KEY) if newest is not None else None
        position = through if isinstance(through, int) and not isinstance(through, bool) else 0
        entries = [(end, entry) for end, entry in entries if end > position]
        if not entries:
            _remember(session, position)
            return []
    entries = entries[:MAX_TOLD]  # what one notice names: the rest wait for the next call
    fold = _Fold()
    cleared = await _latest(session, (TURN_START,))
    fold.cleared_at = -1 if cleared is None else cleared["seq"]
    deciding = await _latest(session, (EVENT_TYPE, TURN_START))
    if deciding is not None:
        fold.apply(deciding)
    for end, entry in entries:
        if "withdraw" in entry:
            data = {"id": entry["withdraw"], "by": entry.get("by"), POSITION_KEY: end}
            fold.apply(await _maybe(session.append(REQUEST_WITHDRAWN, data)))
        else:
            fold.apply(await _maybe(session.append(REQUEST_TAKEN, {**entry, POSITION_KEY: end})))
        _remember(session, end)
    told = [state.request for state in fold.pending.values()]
    if told:
        await _maybe(session.append(REQUEST_NOTIFIED, {"ids": [r.id for r in told]}))
    return told


_THROUGH = "_dsh_requests_through"


def _remember(session: Any, position: int) -> None:
    with contextlib.suppress(AttributeError):  # slots: it reads the log's position each time
        setattr(session, _THROUGH, position)


async def _read(session: Any, inbox: Any, position: int) -> list[tuple[int, Entry]]:
    reader = getattr(inbox, "aread_after", None)
    if reader is not None and hasattr(session, "alatest"):
        found: list[tuple[int, Entry]] = await reader(position)
        return found
    return list(inbox.read_after(position))


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
