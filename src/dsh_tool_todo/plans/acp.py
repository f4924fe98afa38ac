"""The plan as an Agent Client Protocol (ACP) ``plan`` session update.

To a client that declares identified plans, :func:`forward_plans` sends ACP's
plan operations instead, one plan per agent: the lead's and each linked
sub-agent's (:mod:`._acp_tree`).

:func:`plan_update` needs nothing beyond this package. :func:`agent_plan_update`
and :func:`forward_plans` need the optional SDK (the ``acp``
extra: ``pip install '.[acp]'`` from a checkout), imported only when they are called.

Content goes out as the model wrote it: an ACP update is structured data, and
the client that displays it escapes it for its own medium.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, Protocol, TypedDict

from ..core.model import Status
from ..errors import AcpUnavailable, UsageError, missing_extra
from ._lead_asked import AskedForwarder
from .checklist import Todos, plan_items
from .forwarding import Subscribable, event_loop

__all__ = [
    "PlanConnection",
    "PlanForwarder",
    "agent_plan_update",
    "forward_plans",
    "plan_update",
]

if TYPE_CHECKING:
    import asyncio  # imported where a loop is looked up: 20 ms a CLI start need not pay

    from acp.schema import AgentPlanUpdate

    from ..protocols import LogReader
    from ._acp_tree import PlanTree

Priority = Literal["high", "medium", "low"]
PRIORITIES: tuple[Priority, ...] = ("high", "medium", "low")


class PlanEntryPayload(TypedDict):
    content: str
    priority: Priority
    status: Status


class PlanUpdatePayload(TypedDict):
    sessionUpdate: Literal["plan"]
    entries: list[PlanEntryPayload]


class PlanConnection(Protocol):
    """Where plan updates go: the SDK's agent-side connection fits."""

    async def session_update(self, session_id: str, update: Any) -> None: ...


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
    client_capabilities: object = None,
    reader: LogReader | None = None,
    session_key: str | None = None,
) -> PlanForwarder:
    """Send each ``todo/write`` appended to ``session`` to ``connection`` as a plan update.

    Sessions call listeners synchronously, under their lock, from whichever
    thread appends; ``session_update`` is a coroutine on the host's event loop.
    So the listener converts the plan at once (a snapshot) and puts it on a
    queue, in log order, in the appending thread; one sender task on ``loop``
    sends the queue in order (woken directly on the loop's thread, through
    ``call_soon_threadsafe`` from any other). So the client receives every
    plan in log order, and its last plan is the session's last.

    ``client_capabilities`` are those the client sent with ``initialize``. A
    client that declares ``plan`` gets ACP's identified plans (unstable in
    ACP): ``plan_update`` under ``planId`` ``plan:<session key>`` for each
    write, ``plan_removed`` for a ``turn/start`` or a ``session/end``; and,
    with ``reader`` (the store's :class:`~dsh_tool_todo.protocols.LogReader`),
    the same for every sub-agent session linked under this one, found as
    ``dsh-todo sessions`` finds them, as they are linked. The key is
    ``session_key``, else the session's ``key``, else ``session_id``. Any
    other client gets the ``plan`` update of each write, the lead's only.

    Once the session takes a person's request, the lead's updates carry what was asked in
    their ``_meta``, under ``"dsh-tool-todo/requests"``, and a request event that changes
    that sends the lead's plan again as the client holds it (``plan_removed`` again when
    removed; docs/requests.md). With ``reader``, what was asked in the lead's log before this
    call counts too (sent at once, with the plan the log holds).

    ``loop`` defaults to the running loop: call this from a coroutine, or pass
    the loop. Await :meth:`PlanForwarder.drain` before answering the prompt so
    the plans reach the client first; call the forwarder (or await its
    :meth:`~PlanForwarder.aclose`) to stop.
    """
    # imported here: it builds on the wire formats, which build on this module
    from ._acp_tree import PlanTree, plans_supported

    _check_priority(priority)
    model = _sdk_model()
    running = event_loop(loop, "forward_plans")
    key = session_key if session_key is not None else getattr(session, "key", None)
    lead_key = session_id if key is None else key
    tree = None
    if plans_supported(client_capabilities):
        tree = PlanTree(lead_key, priority, reader, running)
    return PlanForwarder(
        session,
        connection,
        session_id,
        model,
        priority,
        running,
        tree=tree,
        reader=reader,
        lead_key=lead_key,
    )


class PlanForwarder(AskedForwarder[Any]):
    """A subscription made by :func:`forward_plans`; calling it unsubscribes.

    Updates wait in one first-in, first-out queue, filled by the listener in
    the appending thread (so in log order: sessions call listeners under
    their append lock) and by the followers of sub-agent logs, and emptied by
    a single sender task on the loop. So the client receives each session's
    updates in its log's order whichever thread appended them, and
    :meth:`drain` can wait for exactly the updates queued before it (and, for
    identified plans, for every event each sub-agent's log held then; with a
    ``reader``, for what was asked in the lead's log before it started).
    :meth:`aclose` stops it and waits for the sub-agents' followers to end.
    """

    def __init__(
        self,
        session: Subscribable,
        connection: PlanConnection,
        session_id: str,
        model: type[AgentPlanUpdate],
        priority: str,
        loop: asyncio.AbstractEventLoop,
        *,
        tree: PlanTree | None = None,
        reader: LogReader | None = None,
        lead_key: str | None = None,
    ) -> None:
        from ._acp_tree import classic_lead  # as in forward_plans: it builds on the wire formats

        priming = reader is not None
        if tree is None:
            lead = classic_lead(model, priority, priming=priming)
        else:
            lead = tree.lead(priming=priming)

        async def send(update: Any) -> None:
            await connection.session_update(session_id=session_id, update=update)

        super().__init__(session, lead, send, loop, tree=tree)
        if reader is not None:
            self.prime(reader, session_id if lead_key is None else lead_key)


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
