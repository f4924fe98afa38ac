"""The plan as an Agent Client Protocol (ACP) ``plan`` session update.

:func:`plan_update` needs nothing beyond this package. :func:`agent_plan_update`
and :func:`forward_plans` need the optional SDK (the ``acp``
extra: ``pip install '.[acp]'`` from a checkout), imported only when they are called.

Content goes out as the model wrote it: an ACP update is structured data, and
the client that displays it escapes it for its own medium.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypedDict

from .checklist import Todos, plan_items
from .contract import EVENT_TYPE
from .errors import MissingExtra, UsageError, missing_extra
from .model import Status

if TYPE_CHECKING:
    import asyncio  # imported where a loop is looked up: 20 ms a CLI start need not pay

    from acp.schema import AgentPlanUpdate

Priority = Literal["high", "medium", "low"]
PRIORITIES: tuple[Priority, ...] = ("high", "medium", "low")


class PlanEntryPayload(TypedDict):
    content: str
    priority: Priority
    status: Status


class PlanUpdatePayload(TypedDict):
    sessionUpdate: Literal["plan"]
    entries: list[PlanEntryPayload]


class AcpUnavailable(MissingExtra):
    """The optional ACP SDK (``agent-client-protocol``) is not installed."""


class PlanConnection(Protocol):
    """Where plan updates go: the SDK's agent-side connection fits."""

    async def session_update(self, session_id: str, update: Any) -> None: ...


class Subscribable(Protocol):
    """A session calling ``listener(event)`` for each appended event, as the reference host's."""

    def subscribe(self, listener: Callable[[Mapping[str, Any]], None], /) -> Callable[[], None]: ...


def plan_update(todos: Todos | None, *, priority: str = "medium") -> PlanUpdatePayload:
    """The ACP ``session/update`` payload that shows ``todos`` as the agent's plan.

    ACP plans replace wholesale, as ``todo_write`` lists do, so every call
    carries the whole list. Statuses carry over unchanged (ACP uses the same
    three); the tool has no priorities, so each entry gets ``priority``. An empty
    list or ``None`` gives ``entries: []``, which clears the client's plan.
    """
    level = _check_priority(priority)
    return {
        "sessionUpdate": "plan",
        "entries": [
            {"content": content, "priority": level, "status": status}
            for content, status in plan_items(todos)
        ],
    }


def agent_plan_update(todos: Todos | None, *, priority: str = "medium") -> AgentPlanUpdate:
    """:func:`plan_update` as the SDK's own model, ready for ``session_update``."""
    return _sdk_model().model_validate(plan_update(todos, priority=priority))


def forward_plans(
    session: Subscribable,
    connection: PlanConnection,
    session_id: str,
    *,
    priority: str = "medium",
    loop: asyncio.AbstractEventLoop | None = None,
) -> PlanForwarder:
    """Send each ``todo/write`` appended to ``session`` to ``connection`` as a plan update.

    Sessions call listeners synchronously, under their lock, from whichever
    thread appends; ``session_update`` is a coroutine on the host's event loop.
    So the listener converts the plan at once (a snapshot) and puts it on a
    queue, in log order, in the appending thread; one sender task on ``loop``
    sends the queue in order (woken directly on the loop's thread, through
    ``call_soon_threadsafe`` from any other). So the client receives every
    plan in log order, and its last plan is the session's last.

    ``loop`` defaults to the running loop: call this from a coroutine, or pass
    the loop. Await :meth:`PlanForwarder.drain` before answering the prompt so
    the plan reaches the client first; call the forwarder to unsubscribe.
    """
    _check_priority(priority)
    model = _sdk_model()
    if loop is None:
        import asyncio

        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            raise UsageError(
                "forward_plans needs the host's event loop: call it from a coroutine or pass loop="
            ) from None
    return PlanForwarder(session, connection, session_id, model, priority, loop)


class PlanForwarder:
    """A subscription made by :func:`forward_plans`; calling it unsubscribes.

    Updates wait in one first-in, first-out queue, filled by the listener in
    the appending thread (so in log order: sessions call listeners under
    their append lock) and emptied by a single sender task on the loop. So
    the client receives updates in log order whichever thread appended them,
    and :meth:`drain` can wait for exactly the updates queued before it.
    """

    def __init__(
        self,
        session: Subscribable,
        connection: PlanConnection,
        session_id: str,
        model: type[AgentPlanUpdate],
        priority: str,
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        self._connection = connection
        self._session_id = session_id
        self._model = model
        self._priority = priority
        self._loop = loop
        self._lock = threading.Lock()
        self._queue: deque[AgentPlanUpdate] = deque()
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
        if _running_loop() is not self._loop:
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
        if event.get("type") != EVENT_TYPE:
            return
        try:
            update = self._model.model_validate(
                plan_update(event["data"]["todos"], priority=self._priority)
            )
        except Exception as error:
            self._record(error)
            return
        with self._lock:
            self._queue.append(update)
            self._queued += 1
        try:
            if _running_loop() is self._loop:
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
                await self._connection.session_update(session_id=self._session_id, update=update)
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
            self._errors.append(error)


def _check_priority(priority: str) -> Priority:
    for level in PRIORITIES:
        if priority == level:
            return level
    raise UsageError(f"priority must be high, medium or low (ACP's priorities), got {priority!r}")


def _missing_sdk(cause: ImportError) -> str:
    return str(missing_extra("the ACP plan bridge", "acp", cause, module="acp"))


def _sdk_model() -> type[AgentPlanUpdate]:
    try:
        from acp.schema import AgentPlanUpdate
    except ImportError as error:
        raise AcpUnavailable(_missing_sdk(error)) from error
    return AgentPlanUpdate


def _running_loop() -> asyncio.AbstractEventLoop | None:
    import asyncio

    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
