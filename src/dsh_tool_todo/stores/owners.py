"""Sessions for hosts that have none of their own: one per owner key, opened on first use.

A chat bot, an MCP server or a web handler knows *who* is calling (a user id,
a conversation id) but keeps no session log. :class:`OwnerRegistry` maps each
owner key to a session, opens it when the owner first calls, serialises that
owner's calls, and closes it again when the owner goes idle or the registry is
full. With a ``directory`` the sessions are durable, one JSONL log per owner
at ``<directory>/<owner_file_name(key)>``; a registry started later on the same
directory (after a restart) opens the same files, so each owner's plan is still
there, and a host resumes it through the session protocol's ``latest``.

>>> import tempfile
>>> from dsh_tool_todo import todo_write_tool
>>> tool = todo_write_tool(allow_parallel_in_progress=False)
>>> directory = tempfile.mkdtemp()
>>> plan = {"todos": [{"content": "Plan", "status": "pending"}]}
>>> with OwnerRegistry(directory) as owners:
...     owners.call("alice@example.com", tool, plan)
'Updated todo list: 1 pending, 0 in progress, 0 completed.'
>>> owner_file_name("alice@example.com")
'alice%40example.com.jsonl'
>>> owner_key("alice%40example.com")
'alice@example.com'

The file-name encoding (see ``docs/owners.md``): characters ``a-z``, ``0-9``,
``-``, ``_`` and ``.`` stand for themselves; every other character, an
upper-case letter, a leading or trailing ``.``, and the first character of a
name Windows reserves (``con``, ``nul``, ``com1`` ...) is written as ``%xx``
per UTF-8 byte, in lower-case hex. So a name is lower case, never hidden, never
``.`` or ``..``, never holds a separator or NUL, and two keys that differ only
in case get names that differ on a case-insensitive file system too. A key
whose name would exceed 255 bytes with its ``.jsonl`` suffix is refused rather
than shortened, since a shortened name could not be decoded back.
"""

from __future__ import annotations

import asyncio
import math
import os
import threading
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..contract import TURN_START
from ..errors import UsageError
from ._closing import ClosedOnExit

if TYPE_CHECKING:
    from ..protocols import StoreSession
    from ..tool import TodoWriteTool

__all__ = ["OwnerNameError", "OwnerRegistry", "owner_file_name", "owner_key"]

SUFFIX = ".jsonl"
MAX_NAME_BYTES = 255 - len(SUFFIX)
"""The longest encoded name: 255 bytes, the usual per-name limit, less the suffix."""

_LITERAL = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-_.")
_HEX = frozenset("0123456789abcdef")
_RESERVED = frozenset(
    ["con", "prn", "aux", "nul"]
    + [f"{device}{digit}" for device in ("com", "lpt") for digit in "123456789"]
)


class OwnerNameError(UsageError, ValueError):
    """An owner key that has no file name, or a file name that no owner key encodes to."""


def owner_file_name(key: str) -> str:
    """The file name (``<name>.jsonl``) that holds ``key``'s session log; reversible.

    Raises :class:`OwnerNameError` for an empty key and for a key whose name
    would be longer than :data:`MAX_NAME_BYTES` (``%xx`` takes 3 bytes per
    escaped UTF-8 byte, so at most 249 plain characters, 83 upper-case letters).
    """
    if not isinstance(key, str):
        raise OwnerNameError(f"an owner key must be a string, not {type(key).__name__}")
    if not key:
        raise OwnerNameError("an owner key must be a non-empty string")
    last = len(key) - 1
    parts = [
        char if char in _LITERAL and not (char == "." and index in (0, last)) else _escape(char)
        for index, char in enumerate(key)
    ]
    if key.split(".", 1)[0] in _RESERVED:
        parts[0] = _escape(parts[0])
    name = "".join(parts)
    if len(name) > MAX_NAME_BYTES:
        raise OwnerNameError(
            f"owner key too long for a file name: it encodes to {len(name)} bytes "
            f"(at most {MAX_NAME_BYTES}); use a shorter key, e.g. a hash of it"
        )
    return name + SUFFIX


def owner_key(file_stem: str) -> str:
    """The owner key whose file is ``<file_stem>.jsonl``: the inverse of :func:`owner_file_name`.

    Raises :class:`OwnerNameError` for a stem that :func:`owner_file_name`
    does not produce (a file someone else put in the directory), so a reader
    of the directory can skip it.
    """
    chars: list[str] = []
    pending = bytearray()
    index = 0
    try:
        while index < len(file_stem):
            char = file_stem[index]
            if char == "%":
                digits = file_stem[index + 1 : index + 3]
                if len(digits) != 2 or not _HEX.issuperset(digits):
                    raise ValueError(digits)
                pending.append(int(digits, 16))
                index += 3
                continue
            if pending:
                chars.append(pending.decode("utf-8", "surrogatepass"))
                pending.clear()
            chars.append(char)
            index += 1
        chars.append(pending.decode("utf-8", "surrogatepass"))
        key = "".join(chars)
        canonical = owner_file_name(key) == file_stem + SUFFIX
    except (ValueError, OwnerNameError):
        canonical = False
    if not canonical:
        raise OwnerNameError(f"{file_stem!r} is not an owner file name (see owner_file_name)")
    return key


async def _acquire_polling(lock: threading.Lock) -> None:
    """Wait for a lock a thread caller holds, without blocking the loop.

    Polling rather than a worker thread: a cancelled wait then never leaves a
    thread behind that takes the lock later and holds it forever.
    """
    while not lock.acquire(blocking=False):
        await asyncio.sleep(0.001)


def _escape(char: str) -> str:
    return "".join(f"%{byte:02x}" for byte in char.encode("utf-8", "surrogatepass"))


class _Entry:
    """One owner's open session, its locks, and how many callers hold or wait for it."""

    __slots__ = ("alock", "closed", "key", "last_used", "lock", "session", "users")

    def __init__(self, key: str, session: StoreSession, now: float) -> None:
        self.key = key
        self.session = session
        self.lock = threading.Lock()
        self.alock = asyncio.Lock()  # binds to a loop on first contended use (3.10+)
        self.users = 0
        self.last_used = now
        self.closed = False


class OwnerRegistry(ClosedOnExit):
    """Owner key → session, opened on first use, closed when evicted.

    ``directory``: where durable sessions live (``None``: in memory, lost with
    the process). ``max_owners``: how many sessions stay open at once; opening
    one more closes the least recently used idle one. ``idle_seconds``: close a
    session unused that long (checked on each use of the registry and by
    :meth:`evict_idle`). An evicted durable session is closed, so its file's
    writer lock is released; it is reopened, plan intact, on its owner's next
    call. A session with a call in progress or waiting is never evicted.

    ``on_open(key, session)`` runs each time a session is opened (first use,
    or again after eviction): a host attaches its projections there, e.g.
    ``host.new_agent(session=session)``, which resumes the recorded plan.

    Calls for one owner run one at a time, in arrival order for asyncio callers
    (:meth:`call`, :meth:`acall`, :meth:`locked`, :meth:`alocked`); calls for
    different owners run in parallel. A second process that opens the same
    owner's file is refused by the JSONL store's one-writer lock.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str] | None = None,
        *,
        max_owners: int | None = 1024,
        idle_seconds: float | None = None,
        fsync: bool = False,
        on_open: Callable[[str, StoreSession], object] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_owners is not None and (
            isinstance(max_owners, bool) or not isinstance(max_owners, int) or max_owners < 1
        ):
            raise UsageError(f"max_owners must be a positive integer or None, not {max_owners!r}")
        if idle_seconds is not None and not (
            isinstance(idle_seconds, (int, float))
            and math.isfinite(idle_seconds)
            and idle_seconds > 0
        ):
            raise UsageError(
                f"idle_seconds must be a finite number above 0 or None, not {idle_seconds!r}"
            )
        self.directory = None if directory is None else Path(directory)
        self.max_owners = max_owners
        self.idle_seconds = idle_seconds
        self.fsync = fsync
        self._on_open = on_open
        self._clock = clock
        self._entries: OrderedDict[str, _Entry] = OrderedDict()  # least recently used first
        self._lock = threading.Lock()
        self._closed = False

    def path(self, owner: str) -> Path:
        """Where ``owner``'s log lives (durable registries only)."""
        if self.directory is None:
            raise UsageError("this registry keeps its sessions in memory: no path")
        return self.directory / owner_file_name(owner)

    def session(self, owner: str) -> StoreSession:
        """``owner``'s session, opened if needed. Valid until evicted; calls go through
        :meth:`call`/:meth:`locked` to be serialised with the others."""
        entry = self._acquire(owner)
        self._release(entry)
        return entry.session

    @contextmanager
    def locked(self, owner: str) -> Iterator[StoreSession]:
        """Hold ``owner``'s session exclusively (against threads and asyncio callers)."""
        entry = self._acquire(owner)
        try:
            with entry.lock:
                yield entry.session
        finally:
            self._release(entry)

    @asynccontextmanager
    async def alocked(self, owner: str) -> AsyncIterator[StoreSession]:
        """:meth:`locked` for asyncio callers: waits without blocking the loop, FIFO."""
        entry = self._acquire(owner)
        try:
            async with entry.alock:  # FIFO among this loop's callers
                if not entry.lock.acquire(blocking=False):
                    await _acquire_polling(entry.lock)
                try:
                    yield entry.session
                finally:
                    entry.lock.release()
        finally:
            self._release(entry)

    def call(self, owner: str, tool: TodoWriteTool, args: Any) -> str:
        """One ``todo_write`` call owned by ``owner``: the text the model reads.

        Raises :class:`~dsh_tool_todo.errors.ToolFailure` when the call could not
        be recorded (answer the model with ``contract.NOT_RECORDED``).
        """
        with self.locked(owner) as session:
            return tool.call(args, session)

    async def acall(self, owner: str, tool: TodoWriteTool, args: Any) -> str:
        """:meth:`call` for asyncio callers."""
        entry = self._acquire(owner)  # what alocked does, without its generator per call
        try:
            async with entry.alock:
                if not entry.lock.acquire(blocking=False):
                    await _acquire_polling(entry.lock)
                try:
                    return await tool.acall(args, entry.session)
                finally:
                    entry.lock.release()
        finally:
            self._release(entry)

    def start_turn(self, owner: str) -> None:
        """Append ``turn/start`` to ``owner``'s session: a new user turn clears the plan.

        Hosts whose framework has turns call it when the user speaks again
        (the seeds' turn contract); MCP has none, so its server never does.
        """
        with self.locked(owner) as session:
            session.append(TURN_START, {})

    async def astart_turn(self, owner: str) -> None:
        """:meth:`start_turn` for asyncio callers."""
        async with self.alocked(owner) as session:
            session.append(TURN_START, {})

    def owners(self) -> list[str]:
        """The owners with an open session, least recently used first."""
        with self._lock:
            return list(self._entries)

    def __contains__(self, owner: object) -> bool:
        return owner in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def evict_idle(self) -> list[str]:
        """Close the sessions idle for ``idle_seconds``; return their owners."""
        with self._lock:
            return self._evict_idle(self._clock())

    def close(self, owner: str | None = None) -> None:
        """Close ``owner``'s session (if open and idle), or, with no owner, every session
        and the registry itself (calls in progress finish first)."""
        if owner is not None:
            with self._lock:
                entry = self._entries.get(owner)
                if entry is not None and entry.users == 0:
                    self._evict(owner, entry)
            return
        with self._lock:
            self._closed = True
            entries = list(self._entries.items())
        for key, entry in entries:
            with entry.lock, self._lock:
                if self._entries.get(key) is entry:
                    self._evict(key, entry)

    def _acquire(self, owner: str) -> _Entry:
        if not isinstance(owner, str) or not owner:
            raise OwnerNameError(f"an owner key must be a non-empty string, not {owner!r}")
        with self._lock:
            if self._closed:
                raise UsageError("this owner registry is closed")
            now = self._clock()
            entry = self._entries.get(owner)
            if entry is None:
                self._evict_idle(now)
                self._make_room()
                entry = _Entry(owner, self._open(owner), now)
                self._entries[owner] = entry
                opened = True
            else:
                self._entries.move_to_end(owner)
                self._evict_idle(now)
                opened = False
            entry.users += 1
            entry.last_used = now
        if opened and self._on_open is not None:
            try:
                self._on_open(owner, entry.session)
            except BaseException:
                self._release(entry)
                self.close(owner)
                raise
        return entry

    def _release(self, entry: _Entry) -> None:
        with self._lock:
            entry.users -= 1
            entry.last_used = self._clock()
            if self._entries.get(entry.key) is entry:  # a long call counts as recent use
                self._entries.move_to_end(entry.key)

    def _open(self, owner: str) -> StoreSession:
        if self.directory is None:
            from .memory import MemorySession

            return MemorySession()
        from .jsonl import JsonlSession

        path = self.path(owner)  # encodes the key first: a bad key creates no directory
        self.directory.mkdir(parents=True, exist_ok=True)
        return JsonlSession(path, fsync=self.fsync)

    def _make_room(self) -> None:
        if self.max_owners is None:
            return
        for key, entry in list(self._entries.items()):  # least recently used first
            if len(self._entries) < self.max_owners:
                return
            if entry.users == 0:
                self._evict(key, entry)

    def _evict_idle(self, now: float) -> list[str]:
        if self.idle_seconds is None:
            return []
        evicted = []
        for key, entry in list(self._entries.items()):
            if now - entry.last_used < self.idle_seconds:
                break  # ordered by last use: the rest are fresher
            if entry.users == 0:
                self._evict(key, entry)
                evicted.append(key)
        return evicted

    def _evict(self, key: str, entry: _Entry) -> None:
        # Under self._lock, with no caller holding the entry.
        del self._entries[key]
        entry.closed = True
        entry.session.close()
