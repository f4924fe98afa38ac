"""The plan as an Agent Client Protocol (ACP) ``plan`` session update.

:func:`plan_update` needs nothing beyond this package. :func:`agent_plan_update`
and :func:`forward_plans` need the optional SDK (``pip install
'dsh-tool-todo[acp]'``), imported only when they are called.

Content goes out as the model wrote it: an ACP update is structured data, and
the client that displays it escapes it for its own medium.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypedDict

from .checklist import Todos, plan_items
from .contract import EVENT_TYPE
from .errors import UsageError
from .model import Status

if TYPE_CHECKING:
    from acp.schema import AgentPlanUpdate

Priority = Literal["high", "medium", "low"]
PRIORITIES: tuple[Priority, ...] = ("high", "medium", "low")
_MISSING_SDK = (
    "the ACP plan bridge needs the agent-client-protocol SDK: pip install 'dsh-tool-todo[acp]'"
)


class PlanEntryPayload(TypedDict):
    content: str
    priority: Priority
    status: Status


class PlanUpdatePayload(TypedDict):
    sessionUpdate: Literal["plan"]
    entries: list[PlanEntryPayload]


class AcpUnavailable(UsageError, ImportError):
    """The optional ACP SDK is not installed."""


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
    So the listener converts the plan at once (a snapshot, in log order) and
    hands the send to ``loop``: directly when it already runs on the loop's
    thread, through ``call_soon_threadsafe`` from any other. Sends run one after
    another in log order, so the client's last plan is the session's last.

    ``loop`` defaults to the running loop: call this from a coroutine, or pass
    the loop. Await :meth:`PlanForwarder.drain` before answering the prompt so
    the plan reaches the client first; call the forwarder to unsubscribe.
    """
    _check_priority(priority)
    model = _sdk_model()
    if loop is None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            raise UsageError(
                "forward_plans needs the host's event loop: call it from a coroutine or pass loop="
            ) from None
    return PlanForwarder(session, connection, session_id, model, priority, loop)


class PlanForwarder:
    """A subscription made by :func:`forward_plans`; calling it unsubscribes."""

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
        self._tail: asyncio.Task[None] | None = None
        self._errors: list[Exception] = []
        self._lock = threading.Lock()
        self._unsubscribe: Callable[[], None] | None = session.subscribe(self._on_event)

    def __call__(self) -> None:
        """Stop forwarding; sends already scheduled still run. Safe to call twice."""
        with self._lock:
            unsubscribe, self._unsubscribe = self._unsubscribe, None
        if unsubscribe is not None:
            unsubscribe()

    async def drain(self) -> None:
        """Wait for every update scheduled so far; raise the first failure since the last drain.

        A failed send does not stop later ones: the next plan supersedes it.
        """
        while self._tail is not None and not self._tail.done():
            await asyncio.wait({self._tail})
        with self._lock:
            errors, self._errors = self._errors, []
        if errors:
            raise errors[0]

    def _on_event(self, event: Mapping[str, Any]) -> None:
        # Never raise: the event is already in the log, and an exception here
        # would reach the tool as if the append had failed.
        if event.get("type") != EVENT_TYPE:
            return
        try:
            update = self._model.model_validate(
                plan_update(event["data"]["todos"], priority=self._priority)
            )
            if _running_loop() is self._loop:
                self._schedule(update)
            else:
                self._loop.call_soon_threadsafe(self._schedule, update)
        except Exception as error:
            self._record(error)

    def _schedule(self, update: AgentPlanUpdate) -> None:
        self._tail = self._loop.create_task(self._send_after(self._tail, update))

    async def _send_after(
        self, previous: asyncio.Task[None] | None, update: AgentPlanUpdate
    ) -> None:
        if previous is not None:
            await asyncio.wait({previous})
        try:
            await self._connection.session_update(session_id=self._session_id, update=update)
        except Exception as error:
            self._record(error)

    def _record(self, error: Exception) -> None:
        with self._lock:
            self._errors.append(error)


def _check_priority(priority: str) -> Priority:
    for level in PRIORITIES:
        if priority == level:
            return level
    raise UsageError(f"priority must be high, medium or low (ACP's priorities), got {priority!r}")


def _sdk_model() -> type[AgentPlanUpdate]:
    try:
        from acp.schema import AgentPlanUpdate
    except ImportError as error:
        raise AcpUnavailable(_MISSING_SDK) from error
    return AgentPlanUpdate


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
