"""A lead session's sub-agents in AG-UI 1.0: who started, their plans, how each ended.

:class:`SubAgents` turns what the sub-agents' logs say into AG-UI events, in the
order it is told: a sub-agent is *placed* under its parent (the fleet's tree of
links, :func:`dsh_tool_todo.plans.fleet.descendants`), then told its plan and its
end. No I/O here: the web view's stream reads the logs (``web/_tree_stream``).

- A sub-agent's first ``todo/write`` opens it: ``SUBAGENT_STARTED`` with its
  ``subagentRunId``, its ``name`` (the agent's, from its key), the delegating
  call as ``parentToolCallId`` (its link's ``parentCallId``) and, below the first
  level, its parent's run as ``parentSubagentRunId``; an ancestor that never wrote
  a plan is opened first, so every parent named was started in the run.
- Each plan is an ``ACTIVITY_SNAPSHOT`` of messageId ``plan:<session>`` carrying
  the ``subagentRunId`` (:func:`~dsh_tool_todo.plans.wire.ag_ui_activity_snapshot`).
- Its ``session/end`` closes it: ``SUBAGENT_FINISHED``, or ``SUBAGENT_ERROR`` with
  the recorded reason; so does a log that can no longer be read (``SUBAGENT_ERROR``
  with the stream's own error codes).
- A run id is the session's name, and ``<name>#<n>`` for the n-th run of a session
  written again after its end (a durable engine's retry of the same call): AG-UI
  refuses a run id used again after it finished.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ..core.links import End
from . import wire

__all__: list[str] = []

FAILED_CODE = "delegated_run_failed"
"""The ``code`` of the ``SUBAGENT_ERROR`` a ``session/end`` of outcome ``failed`` gives."""
_PLAIN_CALL = re.compile(r"[A-Za-z0-9_-]{1,40}")  # what integrations/_links puts after the @


def agent_name(key: str, parent_key: str) -> str:
    """The agent's name in a delegated session's key, ``<parent key>/<name>@<call>`` (as the
    adapters key them), or ``<parent key>/<name>``; any other key is its own name.

    >>> agent_name("ada/researcher@l2", "ada")
    'researcher'
    >>> agent_name("helper-7", "lead")
    'helper-7'
    """
    prefix = parent_key + "/"
    if not key.startswith(prefix) or "/" in key[len(prefix) :]:
        return key
    rest = key[len(prefix) :]
    name, at, call = rest.rpartition("@")
    return name if at and name and _PLAIN_CALL.fullmatch(call) else rest


@dataclass
class _Agent:
    parent: str
    name: str
    call_id: str | None
    run_id: str | None = None  # the newest run's id, once opened
    runs: int = 0
    active: bool = False
    ended: End | None = None  # an end told while it was not open: it ends an opening for a child


class SubAgents:
    """The AG-UI events of the sub-agents under session ``lead``, as each step is told."""

    def __init__(self, lead: str) -> None:
        self.lead = lead
        self._agents: dict[str, _Agent] = {}

    def __contains__(self, name: object) -> bool:
        return name in self._agents

    def place(self, name: str, parent: str, agent: str, call_id: str | None) -> None:
        """Session ``name`` runs under ``parent`` (the lead, or a sub-agent placed before it)
        as agent ``agent``, started by the parent's call ``call_id``."""
        if name not in self._agents:
            self._agents[name] = _Agent(parent, agent, call_id)

    def active(self) -> list[str]:
        """The run ids of the sub-agents started and not ended."""
        return [agent.run_id for agent in self._agents.values() if agent.active and agent.run_id]

    def read(self, name: str, plan: wire.PlanSource, written: bool, end: End | None) -> list[Any]:
        """Its log as read when first followed (or read again, replaced): the plan it
        holds (``written``: a ``todo/write`` decides it) and its end, when that is the newest."""
        events = self.write(name, plan) if written else []
        if end is not None:
            events += self.end(name, end)
        return events

    def write(self, name: str, source: wire.PlanSource) -> list[Any]:
        """A ``todo/write`` (or the plan one leaves): opens the sub-agent if it is not."""
        agent = self._agents[name]
        events = [] if agent.active else self._open(name, on_its_own=True)
        plan = wire.ag_ui_activity_snapshot(name, source, subagent_run_id=agent.run_id)
        return [*events, plan]

    def clear(self, name: str, event: wire.PlanSource) -> list[Any]:
        """A ``turn/start``: an open sub-agent's plan emptied; one not open stays unseen."""
        agent = self._agents[name]
        if not agent.active:
            return []
        return [wire.ag_ui_activity_snapshot(name, event, subagent_run_id=agent.run_id)]

    def end(self, name: str, end: End) -> list[Any]:
        """Its ``session/end``: the finish or error of its open run."""
        agent = self._agents[name]
        if not agent.active:
            agent.ended = end
            return []
        agent.active = False
        assert agent.run_id is not None
        if end.outcome == "finished":
            return [{"type": "SUBAGENT_FINISHED", "subagentRunId": agent.run_id}]
        message = end.error or "the delegated run failed (no reason was recorded)"
        return [_error(agent.run_id, message, FAILED_CODE)]

    def broken(self, name: str, message: str, code: str) -> list[Any]:
        """Its log can no longer be read: an open run ends with ``SUBAGENT_ERROR``."""
        agent = self._agents[name]
        if not agent.active:
            return []
        agent.active = False
        assert agent.run_id is not None
        return [_error(agent.run_id, message, code)]

    def _open(self, name: str, *, on_its_own: bool) -> list[Any]:
        """``SUBAGENT_STARTED`` of a new run of ``name``, its unopened ancestors' first. An
        ancestor that had ended before it was shown is ended again at once, after its start."""
        agent = self._agents[name]
        events: list[Any] = []
        parent = self._agents.get(agent.parent)
        if parent is not None and parent.run_id is None:
            events += self._open(agent.parent, on_its_own=False)
        agent.runs += 1
        agent.run_id = name if agent.runs == 1 else f"{name}#{agent.runs}"
        agent.active = True
        started: dict[str, Any] = {
            "type": "SUBAGENT_STARTED",
            "subagentRunId": agent.run_id,
            "name": agent.name,
        }
        if parent is not None and parent.run_id is not None:
            started["parentSubagentRunId"] = parent.run_id
        if agent.call_id is not None:
            started["parentToolCallId"] = agent.call_id
        events.append(started)
        ended, agent.ended = agent.ended, None
        if ended is not None and not on_its_own:  # its own write after an end is a new run
            events += self.end(name, ended)
        return events


def _error(run_id: str, message: str, code: str) -> dict[str, Any]:
    return {"type": "SUBAGENT_ERROR", "subagentRunId": run_id, "message": message, "code": code}
