"""ACP's identified plans for a lead session and the sub-agents linked under it.

What :func:`~dsh_tool_todo.plans.acp.forward_plans` sends to a client whose
``initialize`` capabilities include ``plan``: each session's plan under its
own ``planId`` (:func:`~dsh_tool_todo.plans.wire.plan_id` of its key, so the
same after a reconnect), ``plan_update`` for each write and ``plan_removed``
when a turn clears it or a sub-agent's session ends. The lead comes through
the forwarder's subscription; its sub-agents through a
:class:`~dsh_tool_todo.protocols.LogReader`, found the way the fleet view finds
them (the reader's rows and the parents they name, through
:func:`~dsh_tool_todo.plans.fleet.descendants`), and followed one task each
(:class:`~._follow_tree.TreeFollower`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..core.contract import EVENT_TYPE, TURN_START
from ..core.links import End, end_of
from ..errors import AcpUnavailable, UsageError, missing_extra
from ..protocols import LogReader, Snapshot
from ._follow_tree import TreeFollower
from ._lead_asked import LeadAsked, Requests
from .acp import plan_update
from .wire import _acp_meta, acp_plan_operation, plan_id

if TYPE_CHECKING:
    from acp.schema import AgentPlanContentUpdate, AgentPlanRemovedUpdate, AgentPlanUpdate

    Operation = AgentPlanContentUpdate | AgentPlanRemovedUpdate


def plans_supported(capabilities: object) -> bool:
    """Whether a client's ``initialize`` capabilities declare identified plans (``plan``).

    ``capabilities`` is the SDK's ``ClientCapabilities``, their JSON
    (``clientCapabilities``), or ``None`` (nothing declared). ACP says ``plan``
    omitted or ``null`` means no support, and ``{}`` support for both updates.
    """
    if capabilities is None:
        return False
    if isinstance(capabilities, Mapping):
        plan = capabilities.get("plan")
    else:
        plan = getattr(capabilities, "plan", _NOT_CAPABILITIES)
        if plan is _NOT_CAPABILITIES:
            raise UsageError(
                "client_capabilities must be the ClientCapabilities the client sent with "
                f"initialize (or their JSON), or None, not {type(capabilities).__name__}"
            )
    if plan is None:
        return False
    if isinstance(plan, Mapping) or hasattr(plan, "model_dump"):
        return True
    raise UsageError(
        f"client_capabilities' plan must be an object ({{}}: plans supported) or None, not {plan!r}"
    )


_NOT_CAPABILITIES = object()


class PlanTree(TreeFollower):
    """The identified plans of the lead (``convert``) and of its sub-agents (followed
    through ``reader`` once :meth:`start` runs, on the forwarder's loop)."""

    def __init__(
        self,
        lead_key: str,
        priority: str,
        reader: LogReader | None,
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        plan_id(lead_key)  # a UsageError now, not at the first write
        super().__init__(lead_key, reader, loop)
        self._priority = priority
        self._update_model, self._removed_model = _sdk_models()

    def convert(
        self, key: str, event: Mapping[str, Any], requests: Requests = None
    ) -> Operation | None:
        """The update ``event`` of session ``key`` sends, or ``None``: a write updates its
        plan; a ``turn/start``, or the session's end, removes it. Either carries
        ``requests`` (what was asked) in its ``_meta`` unless they are ``None``."""
        source: Mapping[str, Any] | None = event
        if end_of(event) is not None:
            source = None  # no plan: removed
        elif event.get("type") not in (EVENT_TYPE, TURN_START):
            return None
        operation = acp_plan_operation(key, source, priority=self._priority, requests=requests)
        if operation["sessionUpdate"] == "plan_removed":
            return self._removed_model.model_validate(operation)
        return self._update_model.model_validate(operation)

    def _opening(self, name: str, snapshot: Snapshot, end: End | None, first: bool) -> None:
        """The plan a sub-agent's log holds when it is (re)read: sent when it has one; a
        cleared or ended plan is removed only when it replaces what was read before."""
        deciding = snapshot.deciding
        if end is None and deciding is not None and deciding.get("type") == EVENT_TYPE:
            self._send(name, deciding)
        elif not first:
            self._gone(name)

    def _gone(self, name: str) -> None:
        self._put(self._removed_model.model_validate(acp_plan_operation(name, None)))

    def lead(self, *, priming: bool) -> LeadAsked[Operation]:
        """The lead's plan, with what was asked beside it (:meth:`convert`'s ``requests``)."""

        def decides(event: Mapping[str, Any]) -> bool:
            return end_of(event) is not None or event.get("type") in (EVENT_TYPE, TURN_START)

        def build(event: Mapping[str, Any], requests: Requests) -> Operation | None:
            return self.convert(self.lead_key, event, requests)

        return LeadAsked(build, decides, priming=priming)


def classic_lead(model: type[AgentPlanUpdate], priority: str, *, priming: bool) -> LeadAsked[Any]:
    """The lead's classic ``plan`` update of each write, with what was asked in its ``_meta``
    once a request was seen. A ``turn/start`` leaves the client's plan as it is."""

    def build(event: Mapping[str, Any], requests: Requests) -> AgentPlanUpdate:
        update: dict[str, Any] = {**plan_update(event["data"]["todos"], priority=priority)}
        if requests is not None:
            update["_meta"] = _acp_meta(requests)
        return model.model_validate(update)

    return LeadAsked(build, lambda event: event.get("type") == EVENT_TYPE, priming=priming)


def _sdk_models() -> tuple[type[AgentPlanContentUpdate], type[AgentPlanRemovedUpdate]]:
    try:
        from acp.schema import AgentPlanContentUpdate, AgentPlanRemovedUpdate
    except ImportError as error:
        raise AcpUnavailable(
            str(missing_extra("the ACP plan bridge", "acp", error, module="acp"))
        ) from error
    return AgentPlanContentUpdate, AgentPlanRemovedUpdate
