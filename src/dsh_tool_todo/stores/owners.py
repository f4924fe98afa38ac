"""Sessions for hosts that have none of their own: one per owner key, opened on first use.

A chat bot, an MCP server or a web handler knows *who* is calling (a user id,
a conversation id) but keeps no session log. :class:`OwnerRegistry` maps each
owner key to a session, opens it when the owner first calls, serialises that
owner's calls, and closes it again when the owner goes idle or the registry is
full. With a ``directory`` the sessions are durable, one JSONL log per owner
at ``<directory>/<owner_file_name(key)>``; a registry started later on the same
directory (after a restart) opens the same files, so each owner's plan is still
there, and a host resumes it through the session protocol's ``latest``. With
``open_session`` the sessions live in whatever store that function opens them
in, e.g. PostgreSQL.

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

How a key becomes a file name and back (``%xx`` escapes, reversible, never hidden):
``docs/owners.md``, "File names".
"""

from __future__ import annotations

import asyncio
import inspect
import math
import os
import threading
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from ..core.contract import TURN_START
from ..errors import OwnerNameError, UsageError
from ..protocols import Event, StoreSession
from ._closing import ClosedOnAsyncExit, ClosedOnExit
from ._owner_lock import _OPEN_FAILURES, _close_session, _Entry, _not_opened, _speaks_store
from ._owner_names import SUFFIX
from ._owner_names import owner_file_name as owner_file_name
from ._owner_names import owner_key as owner_key
from ._owner_requests import OwnerRequests

if TYPE_CHECKING:
    from ..core.tool import TodoWriteTool

__all__ = ["OwnerRegistry", "owner_file_name", "owner_key"]


class OwnerRegistry(OwnerRequests, ClosedOnExit, ClosedOnAsyncExit):
    """Owner key → session, opened on first use, closed when evicted.

    ``directory``: where durable sessions live (``None``: in memory, lost with
    the process). ``open_session(key)``: instead of a directory, the function
    that opens an owner's session in any store (a ``PostgresSession``, say).
    ``max_owners``: how many sessions stay open at once; opening one more
    closes the least recently used idle one. ``idle_seconds``: close a session
    unused that long (checked on each use of the registry and by
    :meth:`evict_idle`). An evicted session is closed, so a durable log's writer
    lock is released; it is reopened, plan intact, on its owner's next call. A
    session with a call in progress or waiting is never evicted.

    ``on_open(key, session)`` runs each time a session is opened (first use,
    or again after eviction), before any call uses it: a host attaches its
    projections there, e.g. ``host.new_agent(session=session)``, which resumes
    the recorded plan. If it raises, the session is closed and forgotten, and
    the callers waiting for it open it afresh.

    Calls for one owner run one at a time, in arrival order, whether they come
    from threads or asyncio tasks of any event loop (:meth:`call`,
    :meth:`acall`, :meth:`locked`, :meth:`alocked`); calls for different owners
    run in parallel. A blocking call that could never get its turn (nested in
    a :meth:`locked` block for the same owner, or made on an event loop whose
    task holds the owner) is refused.

    A session the store cannot open (a second process holds the owner's log,
    the database is out of reach, the directory is gone) raises
    :class:`~dsh_tool_todo.errors.ToolFailure` from every method, the store's
    error as its cause, and nothing is kept: the next call tries again. A
    session its store closed meanwhile (a JSONL log deleted or replaced under
    it) is opened afresh by the owner's next call.

    :meth:`close` never waits: a session whose calls are in progress or waiting
    is closed when the last of them ends; :meth:`aclose` also waits for that.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str] | None = None,
        *,
        open_session: Callable[[str], StoreSession] | None = None,
        max_owners: int | None = 1024,
        idle_seconds: float | None = None,
        fsync: bool = False,
        on_open: Callable[[str, StoreSession], object] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if directory is not None and open_session is not None:
            raise UsageError(
                "give a directory or open_session, not both: open_session decides where "
                "the sessions live"
            )
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
        if directory is not None and os.fspath(directory).startswith("~"):
            raise UsageError(
                f"directory {os.fspath(directory)!r} starts with ~, which Python does not expand "
                "(it would make a directory named ~ here): pass "
                f"Path({os.fspath(directory)!r}).expanduser()"
            )
        self.directory = None if directory is None else Path(directory)
        self.max_owners = max_owners
        self.idle_seconds = idle_seconds
        self.fsync = fsync
        self._open_session = open_session
        self._on_open = on_open
        self._clock = clock
        self._entries: OrderedDict[str, _Entry] = OrderedDict()  # least recently used first
        self._lock = threading.Lock()
        self._closed = False

    def path(self, owner: str) -> Path:
        """Where ``owner``'s log lives (durable registries only)."""
        if self._open_session is not None:
            raise UsageError("this registry's sessions come from open_session: no path")
        if self.directory is None:
            raise UsageError("this registry keeps its sessions in memory: no path")
        return self.directory / owner_file_name(owner)

    def key(self, owner: str) -> str:
        """The name a viewer knows ``owner``'s session by, what a child's ``parent`` holds:
        the log's file name without ``.jsonl`` with a directory, the session's own ``key``
        with ``open_session`` (it is opened to ask), the owner key in memory."""
        if self._open_session is None:
            return owner_file_name(owner)[: -len(SUFFIX)] if self.directory else owner
        key = getattr(self.session(owner), "key", None)
        if not isinstance(key, str) or not key:
            raise UsageError(
                f"owner {owner!r}: its session has no key to name it by (open_session "
                "returned a session without a .key)"
            )
        return key

    def link(self, owner: str, parent: str, *, parent_call_id: str | None = None) -> Event | None:
        """Record that ``owner``'s session works for the session keyed ``parent``
        (see :mod:`dsh_tool_todo.core.links`), opening it if needed.

        Call it before the owner's first call: the link is recorded at the head of
        a new log; a log that records this parent already is left as it is (the
        owner's sub-agent was started again), and one started for another parent,
        or holding events and no link, is refused with
        :class:`~dsh_tool_todo.errors.LinkConflict`, nothing written.
        """
        with self.locked(owner) as session:
            return cast("Event | None", _link(owner, session, parent, parent_call_id))

    async def alink(
        self, owner: str, parent: str, *, parent_call_id: str | None = None
    ) -> Event | None:
        """:meth:`link` for asyncio callers."""
        async with self.alocked(owner) as session:
            found = _link(owner, session, parent, parent_call_id)
            if inspect.isawaitable(found):
                return cast("Event | None", await found)
            return cast("Event | None", found)

    def session(self, owner: str) -> StoreSession:
        """``owner``'s session, opened if needed. Valid until evicted; calls go through
        :meth:`call`/:meth:`locked` to be serialised with the others."""
        while True:
            entry, opening = self._enter(owner)
            if opening:
                self._open(entry)
                entry.lock.release()
            elif entry.opened.locked():
                if entry.lock.held_by_this_thread():  # only the opener holds it before then
                    self._release(entry)
                    raise UsageError(
                        f"on_open is still running for owner {owner!r}: "
                        "use the session it was given"
                    )
                with entry.opened:  # released once the opening has finished
                    pass
            self._release(entry)
            if self._usable(entry):
                return entry.session

    @contextmanager
    def locked(self, owner: str) -> Iterator[StoreSession]:
        """Hold ``owner``'s session exclusively (against threads and asyncio callers)."""
        entry = self._hold(owner)
        try:
            yield entry.session
        finally:
            self._unhold(entry)

    @asynccontextmanager
    async def alocked(self, owner: str) -> AsyncIterator[StoreSession]:
        """:meth:`locked` for asyncio callers: waits without blocking the loop."""
        entry = await self._ahold(owner)
        try:
            yield entry.session
        finally:
            self._unhold(entry)

    def call(
        self, owner: str, tool: TodoWriteTool, args: Any, *, call_id: str | None = None
    ) -> str:
        """One ``todo_write`` call owned by ``owner``: the text the model reads.

        Raises :class:`~dsh_tool_todo.errors.ToolFailure` when the call could not
        be recorded, its session not opened or its append failed (answer the
        model with ``contract.NOT_RECORDED``).
        ``call_id``: the framework's id of the call, recorded with it.
        """
        entry = self._hold(owner)  # what locked does, without its generator per call
        try:
            return tool.call(args, entry.session, call_id=call_id)
        finally:
            self._unhold(entry)

    async def acall(
        self, owner: str, tool: TodoWriteTool, args: Any, *, call_id: str | None = None
    ) -> str:
        """:meth:`call` for asyncio callers."""
        entry = await self._ahold(owner)  # what alocked does, without its generator per call
        try:
            return await tool.acall(args, entry.session, call_id=call_id)
        finally:
            self._unhold(entry)

    def start_turn(self, owner: str) -> None:
        """Append ``turn/start`` to ``owner``'s session: a new user turn clears the plan.

        Hosts whose framework has turns call it when the user speaks again
        (the seeds' turn contract); MCP has none, so its server never does.
        """
        with self.locked(owner) as session:
            appended: object = session.append(TURN_START, {})
            if inspect.iscoroutine(appended):
                appended.close()  # never run: nothing was written
                raise UsageError(
                    "this session's append is asynchronous, so turn/start was not written: "
                    "call `await owners.astart_turn(owner)`"
                )

    async def astart_turn(self, owner: str) -> None:
        """:meth:`start_turn` for asyncio callers."""
        async with self.alocked(owner) as session:
            appended: object = session.append(TURN_START, {})
            if inspect.isawaitable(appended):  # a session with an async append
                await appended

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
        """Close ``owner``'s session (if open and idle), or, with no owner, the registry:
        it refuses new calls, closes every idle session now and every other one when its
        last call in progress or waiting ends. Returns at once, even on an event loop."""
        with self._lock:
            if owner is None:
                self._closed = True
                idle = [entry for entry in self._entries.values() if entry.users == 0]
            else:
                entry = self._entries.get(owner)
                idle = [] if entry is None or entry.users else [entry]
            for entry in idle:
                self._evict(entry)

    async def aclose(self) -> None:
        """:meth:`close`, then wait until the calls in progress and waiting have ended
        and every session is closed."""
        task = asyncio.current_task()
        with self._lock:
            mine = [entry.key for entry in self._entries.values() if entry.lock.held_by(task)]
        if mine:
            raise UsageError(
                f"aclose() inside a call for owner {mine[0]!r} would wait for itself: "
                "leave the call first, or use close()"
            )
        self.close()
        delay = 0.001
        while self._entries:
            await asyncio.sleep(delay)
            delay = min(2 * delay, 0.05)

    def _enter(self, owner: str) -> tuple[_Entry, bool]:
        """``owner``'s entry, counted as used; ``True`` if this caller must open it
        (it then holds the entry's lock)."""
        if not isinstance(owner, str) or not owner:
            raise OwnerNameError(f"an owner key must be a non-empty string, not {owner!r}")
        with self._lock:
            if self._closed:
                raise UsageError("this owner registry is closed")
            now = self._clock()
            # Swept first: this owner's own session, idle too long, is closed with the others
            # and opened again below (swept after, it was closed under the caller's feet).
            self._evict_idle(now)
            entry = self._entries.get(owner)
            opening = entry is None
            if entry is None:
                self._make_room()
                entry = self._entries[owner] = _Entry(owner, now)
                entry.lock.acquire()  # a new lock: taken at once
            else:
                self._entries.move_to_end(owner)
            entry.users += 1
            entry.last_used = now
        return entry, opening

    def _open(self, entry: _Entry) -> None:
        """Open ``entry``'s session and run ``on_open``, holding its lock. On failure the
        entry is gone and its session closed before any waiter wakes."""
        session: StoreSession | None = None
        try:
            try:
                session = (
                    self._open_default(entry.key)
                    if self._open_session is None
                    else (self._open_session(entry.key))
                )
            except _OPEN_FAILURES as error:  # the store's, not the caller's: a later call may do
                raise _not_opened(entry.key, error) from error
            if not _speaks_store(session):
                raise UsageError(
                    f"open_session returned {type(session).__name__} for owner {entry.key!r}, "
                    "not a session (append, subscribe, latest and close)"
                )
            if self._on_open is not None:
                self._on_open(entry.key, session)
        except BaseException:
            with self._lock:
                entry.failed = True
                entry.users -= 1
                del self._entries[entry.key]
                if _speaks_store(session):
                    _close_session(entry.key, session)
            entry.opened.release()
            entry.lock.release()
            raise
        entry.session = session
        entry.opened.release()

    def _hold(self, owner: str) -> _Entry:
        """``owner``'s opened entry, its lock held by this thread."""
        # _ahold is the async twin, written out
        while True:
            entry, opening = self._enter(owner)
            if opening:
                self._open(entry)
                return entry
            try:
                if not entry.lock.acquire():
                    raise UsageError(
                        f"owner {owner!r} is held or awaited by this thread already (an "
                        "enclosing locked() block, or a task of this event loop), so this "
                        "blocking call would never return: use acall or alocked in asyncio "
                        "code, and do not nest calls for one owner"
                    )
            except BaseException:
                self._release(entry)
                raise
            if self._usable(entry):
                return entry
            self._unhold(entry)  # its opening failed, or its session closed since: open it afresh

    async def _ahold(self, owner: str) -> _Entry:
        """:meth:`_hold` for a task: waits without blocking its event loop."""
        # the async twin of _hold, written out: the lock is taken by awaiting, not blocking
        while True:
            entry, opening = self._enter(owner)
            if opening:
                self._open(entry)
                return entry
            try:
                if not await entry.lock.acquire_async():
                    raise UsageError(
                        f"owner {owner!r} is held by this task already: calls for one owner "
                        "do not nest"
                    )
            except BaseException:
                self._release(entry)
                raise
            if self._usable(entry):
                return entry
            self._unhold(entry)

    def _usable(self, entry: _Entry) -> bool:
        """Whether ``entry``'s session was opened and is open still. One its store closed
        since (a JSONL log deleted or replaced under it closes itself) is forgotten, like a
        failed opening, so that this caller and those waiting open the owner afresh."""
        if entry.failed:
            return False
        if getattr(entry.session, "closed", False) is not True:
            return True
        with self._lock:
            entry.failed = True
            if self._entries.get(entry.key) is entry:
                del self._entries[entry.key]
        return False

    def _unhold(self, entry: _Entry) -> None:
        entry.lock.release()
        self._release(entry)

    def _release(self, entry: _Entry) -> None:
        with self._lock:
            entry.users -= 1
            entry.last_used = self._clock()
            if self._entries.get(entry.key) is not entry:  # its opening failed
                return
            if self._closed and entry.users == 0:
                self._evict(entry)
            else:
                self._entries.move_to_end(entry.key)  # a long call counts as recent use

    def _open_default(self, owner: str) -> StoreSession:
        if self.directory is None:
            from .memory import MemorySession

            return MemorySession(key=owner)
        from .jsonl import JsonlSession

        path = self.path(owner)  # encodes the key first: a bad key creates no directory
        self.directory.mkdir(parents=True, exist_ok=True)
        return JsonlSession(path, fsync=self.fsync)

    def _make_room(self) -> None:
        if self.max_owners is None:
            return
        for entry in list(self._entries.values()):  # least recently used first
            if len(self._entries) < self.max_owners:
                return
            if entry.users == 0:
                self._evict(entry)

    def _evict_idle(self, now: float) -> list[str]:
        if self.idle_seconds is None:
            return []
        evicted = []
        for entry in list(self._entries.values()):
            if now - entry.last_used < self.idle_seconds:
                break  # ordered by last use: the rest are fresher
            if entry.users == 0:
                self._evict(entry)
                evicted.append(entry.key)
        return evicted

    def _evict(self, entry: _Entry) -> None:
        # Under self._lock, with no caller holding or awaiting the entry, so it is opened.
        # Closing under the lock: an owner's next session opens only once this one is
        # closed (a durable log admits one writer).
        del self._entries[entry.key]
        _close_session(entry.key, entry.session)


def _link(owner: str, session: object, parent: str, parent_call_id: str | None) -> Any:
    link = getattr(session, "link", None)
    if link is None:
        raise UsageError(
            f"owner {owner!r}: its {type(session).__name__} cannot record a parent (no link "
            "method): open_session must return a store session of this library"
        )
    return link(parent, parent_call_id=parent_call_id)
