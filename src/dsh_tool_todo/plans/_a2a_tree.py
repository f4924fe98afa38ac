"""A lead's sub-agents as A2A artifacts of the lead's task, one per agent, each attributed.

What :func:`~dsh_tool_todo.integrations.a2a.forward_plan_artifacts` sends with
a ``reader``: the lead's plan stays artifact ``plan``, exactly as without one;
each session under the lead (found and followed by
:class:`~._follow_tree.TreeFollower`, the fleet's tree of links) gets an
artifact of its own, ``artifactId`` ``plan:<session key>``
(:func:`~dsh_tool_todo.plans.wire.plan_id`), one data part ``{"todos": [...]}``,
``append`` false, and ``metadata`` naming its agent (:mod:`._agents`: session,
name, parent, delegating call, and how its run ended). Each write replaces the
artifact; its ``session/end`` sends it again, its last plan with the end; a
``turn/start`` empties it. A2A has no way to take an artifact back, so a
sub-agent's log deleted sends it emptied, marked ``unreadable``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ..core.contract import EVENT_TYPE, TURN_START
from ..core.links import End, end_of
from ..errors import SessionNotFound
from ..protocols import LogReader, Snapshot
from ._agents import Agent, agent_json, placed, unreadable_json
from ._follow_tree import TreeFollower
from .wire import PlanItem, a2a_artifact_update, plan_id, plan_of

if TYPE_CHECKING:
    import asyncio

__all__: list[str] = []


class ArtifactTree(TreeFollower):
    """The artifact updates of the sessions under ``lead_key``, each built by ``build`` from
    its JSON form (the SDK's own event, for the forwarder's queue)."""

    def __init__(
        self,
        lead_key: str,
        reader: LogReader,
        loop: asyncio.AbstractEventLoop,
        *,
        task_id: str,
        context_id: str,
        build: Callable[[dict[str, Any]], Any],
    ) -> None:
        plan_id(lead_key)  # a UsageError now, not at the first write
        super().__init__(lead_key, reader, loop)
        self._task = (task_id, context_id)
        self._build = build
        self._agents: dict[str, Agent] = {}
        self._plans: dict[str, list[PlanItem]] = {}  # the plan each one last showed

    async def _placed(self, name: str, parent: str) -> None:
        assert self._reader is not None
        self._agents[name] = await placed(self._reader, name, parent)

    def convert(self, key: str, event: Mapping[str, Any]) -> Any:
        """A write replaces the sub-agent's plan, and so does a ``turn/start`` (emptied) once
        it has shown one; its end shows its last plan with the end."""
        kind, shown = event.get("type"), key in self._plans
        end = end_of(event)
        if end is not None:
            return self._update(key, self._plans[key], end) if shown else None
        if kind == EVENT_TYPE or (kind == TURN_START and shown):
            return self._update(key, plan_of(event), None)
        return None

    def _opening(self, name: str, snapshot: Snapshot, end: End | None, first: bool) -> None:
        """Its log as read: its plan and its end, once it has written one (a sub-agent that
        has not planned yet shows nothing, as in AG-UI); a log read anew replaces what was
        shown."""
        deciding = snapshot.deciding
        written = deciding is not None and deciding.get("type") == EVENT_TYPE
        if not written and name not in self._plans:
            return
        try:
            update = self._update(name, plan_of(deciding), end)
        except Exception as error:  # a write no reader shows: the next one supersedes it
            self._record(error)
            return
        self._put(update)

    def _gone(self, name: str) -> None:
        if name in self._plans:
            unreadable = unreadable_json(name, SessionNotFound(name))
            self._put(self._update(name, [], None, unreadable))

    def _update(
        self,
        name: str,
        todos: list[PlanItem],
        end: End | None,
        unreadable: dict[str, str] | None = None,
    ) -> Any:
        self._plans[name] = todos
        task_id, context_id = self._task
        update: dict[str, Any] = dict(
            a2a_artifact_update(todos, task_id=task_id, context_id=context_id)
        )
        update["artifact"] = {
            **update["artifact"],
            "artifactId": plan_id(name),
            "metadata": agent_json(self._agents[name], end, unreadable),
        }
        return self._build(update)
