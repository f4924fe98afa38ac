"""The owner registry's per-owner entry and lock: one call at a time, in arrival order, for
threads and asyncio tasks of any loop; what counts as a session, which failures to open one
are the store's, and the closing of a session the registry lets go of (split out of
``owners``: the registry uses them, nothing else does)."""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from typing import TYPE_CHECKING, Any, TypeGuard

from ..core.listeners import LOGGER_NAME
from ..errors import InvalidLog, LogBusy, StoreUnavailable, ToolFailure

if TYPE_CHECKING:
    from ..protocols import StoreSession

__all__: list[str] = []


class _Waiter:
    """A caller queued for an owner: a thread (woken by ``event``) or a task (``future``)."""

    __slots__ = ("event", "future", "granted", "task", "thread")

    def __init__(
        self, thread: int, task: asyncio.Task[Any] | None, future: asyncio.Future[None] | None
    ) -> None:
        self.thread = thread  # a task's: its event loop's thread
        self.task = task  # the task waiting, blocking its loop or not
        self.future = future
        self.event = threading.Event() if future is None else None
        self.granted = False

    def wake(self) -> bool:
        """Tell the waiter it holds the lock; False if it can never run again."""
        if self.event is not None:
            self.event.set()
            return True
        assert self.future is not None
        try:
            self.future.get_loop().call_soon_threadsafe(_resolve, self.future)
        except RuntimeError:  # its event loop is closed
            return False
        return True


def _current_task() -> asyncio.Task[Any] | None:
    """The task running in this thread, if any: it holds what it locks, even by a blocking call."""
    # _get_running_loop (in asyncio.events.__all__) answers None where current_task()
    # would raise: a thread's call costs 0.05 us instead of 1.8 us.
    loop = asyncio._get_running_loop()
    return None if loop is None else asyncio.current_task(loop)


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():  # a cancelled task passes the lock on itself
        future.set_result(None)


class _OwnerLock:
    """One owner's calls one at a time, in arrival order, for threads and tasks of any loop.

    ``asyncio.Lock`` binds to one event loop, and a thread lock polled from a loop
    is neither fair nor prompt, so the lock is handed from holder to the first
    waiter directly. A waiter interrupted or cancelled after it was handed the lock
    passes it on, so it is never left held by a caller that has gone.
    """

    __slots__ = ("_holder", "_holder_task", "_mutex", "_queue")

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._holder: int | None = None  # the holder's thread (a task's: its loop's); None: free
        self._holder_task: asyncio.Task[Any] | None = None
        self._queue: deque[_Waiter] = deque()

    def held_by_this_thread(self) -> bool:
        return self._holder == threading.get_ident()

    def held_by(self, task: asyncio.Task[Any] | None) -> bool:
        return task is not None and self._holder_task is task

    def acquire(self) -> bool:
        """Block until held; ``False``, at once, when waiting could never end: this thread
        holds the lock already, or its event loop has a task queued for it."""
        me, task = threading.get_ident(), _current_task()
        with self._mutex:
            if self._holder is None:
                self._holder, self._holder_task = me, task
                return True
            if self._holder == me or any(waiter.thread == me for waiter in self._queue):
                return False
            waiter = _Waiter(me, task, None)
            self._queue.append(waiter)
        assert waiter.event is not None
        try:
            waiter.event.wait()
        except BaseException:
            self._abandon(waiter)
            raise
        return True

    async def acquire_async(self) -> bool:
        """Wait until held, without blocking the event loop; ``False``, at once, when
        this task holds the lock already."""
        me, task = threading.get_ident(), asyncio.current_task()
        with self._mutex:
            if self._holder is None:
                self._holder, self._holder_task = me, task
                return True
            if self.held_by(task):
                return False
            waiter = _Waiter(me, task, asyncio.get_running_loop().create_future())
            self._queue.append(waiter)
        assert waiter.future is not None
        try:
            await waiter.future
        except BaseException:  # cancelled: maybe after being handed the lock
            self._abandon(waiter)
            raise
        return True

    def release(self) -> None:
        with self._mutex:
            self._pass_on()

    def _abandon(self, waiter: _Waiter) -> None:
        with self._mutex:
            if waiter.granted:
                self._pass_on()
            else:
                self._queue.remove(waiter)

    def _pass_on(self) -> None:
        # Under self._mutex.
        while self._queue:
            waiter = self._queue.popleft()
            waiter.granted = True
            self._holder, self._holder_task = waiter.thread, waiter.task
            if waiter.wake():
                return
        self._holder, self._holder_task = None, None


class _Entry:
    """One owner's session, its lock, and how many callers hold or wait for it.

    The caller that creates an entry holds its lock until the session is open
    and ``on_open`` has returned, so every other call waits for both.
    """

    __slots__ = ("failed", "key", "last_used", "lock", "opened", "session", "users")

    session: StoreSession  # set once opened

    def __init__(self, key: str, now: float) -> None:
        self.key = key
        self.lock = _OwnerLock()
        # Held until opening finished, successfully or not: a lock, where a threading.Event
        # (a Condition and its lock, built in Python) cost a third of a steady call per owner.
        self.opened = threading.Lock()
        self.opened.acquire()
        self.failed = False
        self.users = 0
        self.last_used = now


_STORE_METHODS = ("append", "subscribe", "latest", "close")

# The store's failures to open an owner's session, not the caller's mistakes: a log another
# writer holds, a store out of reach, a file system that refuses (the directory deleted and
# a file put in its place, no space, no permission), a log whose content is no session log.
# Nothing was recorded, and a later call may succeed, so they are a ToolFailure (a model is
# answered NOT_RECORDED); a UsageError (a key a store refuses, a missing extra) is still
# raised as it is.
_OPEN_FAILURES = (LogBusy, StoreUnavailable, InvalidLog, OSError)
_REPAIR = (
    "; nothing was recorded: move the log aside (this owner's next call starts a new one) or "
    "repair it, then call again"
)


def _not_opened(key: str, error: BaseException) -> ToolFailure:
    repair = _REPAIR if isinstance(error, InvalidLog) else ""
    return ToolFailure(f"owner {key!r}: its session could not be opened: {error}{repair}")


def _speaks_store(session: object) -> TypeGuard[StoreSession]:
    """``isinstance(session, StoreSession)`` as the runtime protocol decides it (each of its
    methods present, not ``None``), without typing's walk of the protocol on every check: a
    new owner's open paid some 58,000 instructions for it, about a steady call's worth."""
    return all(getattr(session, name, None) is not None for name in _STORE_METHODS)


def _close_session(key: str, session: StoreSession) -> None:
    """Close a session the registry lets go of; a failure is logged, never another call's."""
    try:
        session.close()
    except Exception:
        import logging  # only on failure: keeps the import light

        logging.getLogger(LOGGER_NAME).error(
            "closing owner %r: its session's close() raised; the registry no longer holds it",
            key,
            exc_info=True,
        )
