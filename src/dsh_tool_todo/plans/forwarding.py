"""Session events to an async consumer, in log order, whichever thread appends.

The machinery under :class:`~dsh_tool_todo.plans.acp.PlanForwarder` (ACP) and
:class:`~dsh_tool_todo.integrations.a2a.PlanArtifactForwarder` (A2A).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from ..errors import UsageError

__all__ = ["OrderedForwarder"]

if TYPE_CHECKING:
    import asyncio  # imported where a loop is looked up: 20 ms a CLI start need not pay

Update = TypeVar("Update")
MAX_KEPT_ERRORS = 100


class Subscribable(Protocol):
    """A session calling ``listener(event)`` for each appended event, as the reference host's."""

    def subscribe(self, listener: Callable[[Mapping[str, Any]], None], /) -> Callable[[], None]: ...


class OrderedForwarder(Generic[Update]):
    """A subscription that converts each event and sends it; calling it unsubscribes.

    Sessions call listeners synchronously, under their lock, from whichever
    thread appends; ``send`` is a coroutine on the host's event loop. So the
    listener converts the event at once (a snapshot; ``convert`` returns
    ``None`` for events not to send) and puts it on one first-in, first-out
    queue, in log order, in the appending thread; a single sender task on
    ``loop`` sends the queue in order (woken directly on the loop's thread,
    through ``call_soon_threadsafe`` from any other). So the consumer
    receives updates in log order whichever thread appended them, and
    :meth:`drain` can wait for exactly the updates queued before it.
    """

    def __init__(
        self,
        session: Subscribable,
        convert: Callable[[Mapping[str, Any]], Update | None],
        send: Callable[[Update], Awaitable[None]],
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        self._convert = convert
        self._send = send
        self._loop = loop
        self._lock = threading.Lock()
        self._queue: deque[Update] = deque()
        self._queued = 0  # updates ever queued (under the lock)
        self._finished = 0  # updates whose send has ended, sent or failed (loop thread)
        self._sender: asyncio.Task[None] | None = None  # loop thread only
        self._waiters: list[asyncio.Future[None]] = []  # loop thread only
        self._errors: list[Exception] = []
        self._unsubscribe: Callable[[], None] | None = session.subscribe(self._on_event)

    def __call__(self) -> None:
        """Stop forwarding; updates already queued are still sent. Safe to call twice."""
        with self._lock:
            unsubscribe, self._unsubscribe = self._unsubscribe, None
        if unsubscribe is not None:
            unsubscribe()

    async def drain(self) -> None:
        """Wait until every update queued before this call has been sent (or has failed);
        raise the first failure since the last drain.

        Await it on the forwarder's loop. A failed send does not stop later
        ones: the next plan supersedes it.
        """
        if running_loop() is not self._loop:
            raise UsageError("await drain() on the event loop the forwarder was made for")
        with self._lock:
            target = self._queued
        self._wake()  # updates queued from other threads may still wait for their hand-over
        while self._finished < target:
            waiter = self._loop.create_future()
            self._waiters.append(waiter)
            await waiter
        with self._lock:
            errors, self._errors = self._errors, []
        if errors:
            raise errors[0]

    def _on_event(self, event: Mapping[str, Any]) -> None:
        # Never raise: the event is already in the log.
        try:
            update = self._convert(event)
        except Exception as error:
            self._record(error)
            return
        if update is not None:
            self._put(update)

    def _put(self, update: Update) -> None:
        """Queue ``update`` behind every update queued so far (from any thread)."""
        with self._lock:
            self._queue.append(update)
            self._queued += 1
        try:
            if running_loop() is self._loop:
                self._wake()
            else:
                self._loop.call_soon_threadsafe(self._wake)
        except Exception as error:  # a closed loop: nothing can be sent any more
            self._record(error)

    def _wake(self) -> None:
        if self._sender is None or self._sender.done():  # done: cancelled mid-send
            with self._lock:
                if not self._queue:
                    return
            self._sender = self._loop.create_task(self._send_queued())

    async def _send_queued(self) -> None:
        while True:
            with self._lock:
                if not self._queue:
                    self._sender = None
                    return
                update = self._queue.popleft()
            try:
                await self._send(update)
            except Exception as error:
                self._record(error)
            finally:
                self._finished += 1
                waiters, self._waiters = self._waiters, []
                for waiter in waiters:
                    if not waiter.done():
                        waiter.set_result(None)

    def _record(self, error: Exception) -> None:
        with self._lock:
            # drain raises the first; a forwarder no one drains keeps a bounded list
            if len(self._errors) < MAX_KEPT_ERRORS:
                self._errors.append(error)


def event_loop(loop: asyncio.AbstractEventLoop | None, caller: str) -> asyncio.AbstractEventLoop:
    """``loop``, or the running loop; a :class:`UsageError` naming ``caller`` when there is none."""
    if loop is not None:
        return loop
    import asyncio

    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        raise UsageError(
            f"{caller} needs the host's event loop: call it from a coroutine or pass loop="
        ) from None


def running_loop() -> asyncio.AbstractEventLoop | None:
    import asyncio

    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
