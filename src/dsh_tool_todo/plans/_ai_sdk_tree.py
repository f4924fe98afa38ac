"""A lead's sub-agents in the AI SDK's UI message stream: one data part per agent, attributed.

:class:`SubAgentParts` takes the steps the web view's tree stream reads from the
sub-agents' logs (``web/_tree_stream``, the same steps AG-UI's
:class:`~._ag_ui_tree.SubAgents` takes) and gives UI message chunks. The lead's
plan stays the ``data-plan`` part it is without a tree; each session under the
lead is a part of type :data:`DATA_TYPE`, ``id`` ``plan:<session>``
(:func:`~dsh_tool_todo.plans.wire.plan_id`), so the AI SDK's reader, which
replaces a data part of the same type and id, keeps one part per agent. Its
data is the agent's attribution (:mod:`._agents`) and its plan::

    {"session", "name", "parent", "parentCallId", "end", "todos": [...]}

A sub-agent shows from its first ``todo/write`` (read as it stands, with its end); a
``turn/start`` empties its plan, its ``session/end`` sets ``end`` beside its
last plan, and a write after the end is a run started again (``end`` back to
``null``). A log that can no longer be read empties it, with ``unreadable``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..core.links import End
from . import wire
from ._agents import Agent, agent_json

__all__: list[str] = []

DATA_TYPE = "data-subagent-plan"


@dataclass
class _State:
    agent: Agent
    todos: list[wire.PlanItem]
    end: End | None = None
    shown: bool = False


class SubAgentParts:
    """The AI SDK chunks of the sub-agents under session ``lead``, as each step is told."""

    def __init__(self, lead: str) -> None:
        self.lead = lead
        self._agents: dict[str, _State] = {}

    def __contains__(self, name: object) -> bool:
        return name in self._agents

    def place(self, name: str, parent: str, agent: str, call_id: str | None) -> None:
        """Session ``name`` runs under ``parent`` as agent ``agent``, started by ``call_id``."""
        if name not in self._agents:
            self._agents[name] = _State(Agent(name, agent, parent, call_id), [])

    def read(self, name: str, plan: wire.PlanSource, written: bool, end: End | None) -> list[Any]:
        """Its log as read when first followed (or read again): its plan and its end, once it
        has written one (as AG-UI starts a sub-agent at its first write)."""
        state = self._agents[name]
        if not (written or state.shown):
            state.end = end
            return []
        state.todos, state.end = wire.plan_of(plan), end
        return [self._part(state)]

    def write(self, name: str, source: wire.PlanSource) -> list[Any]:
        """A ``todo/write``: its plan, its run going on."""
        state = self._agents[name]
        state.todos, state.end = wire.plan_of(source), None
        return [self._part(state)]

    def clear(self, name: str, event: wire.PlanSource) -> list[Any]:
        """A ``turn/start``: a shown plan emptied; one not shown stays unseen."""
        state = self._agents[name]
        if not state.shown:
            return []
        state.todos = wire.plan_of(event)
        return [self._part(state)]

    def end(self, name: str, end: End) -> list[Any]:
        """Its ``session/end``: its last plan, and how its run ended."""
        state = self._agents[name]
        state.end = end
        return [self._part(state)] if state.shown else []

    def broken(self, name: str, message: str, code: str) -> list[Any]:
        """Its log can no longer be read: a shown part is emptied, marked ``unreadable``."""
        state = self._agents[name]
        if not state.shown:
            return []
        state.todos = []
        return [self._part(state, {"message": message, "code": code})]

    def _part(self, state: _State, unreadable: dict[str, str] | None = None) -> dict[str, Any]:
        state.shown = True
        data = {**agent_json(state.agent, state.end, unreadable), "todos": state.todos}
        return {"type": DATA_TYPE, "id": wire.plan_id(state.agent.session), "data": data}
