"""Sub-agent links for the adapters: which agent delegated the running call, and how keys nest.

A framework runs a sub-agent inside one of the parent's tool calls (the OpenAI
Agents SDK's ``agent.as_tool()``, a pydantic-ai tool that runs another agent).
The adapter's wrapper around that tool (``linked_agent_tool``,
``linked_toolset``) marks the call with a context variable while it runs, so a
``todo_write`` call made inside it, however deep, knows the chain of agents
above it and the parent's tool-call id. asyncio copies context variables into
the tasks a call starts, so the mark reaches the sub-agent's tool calls and
nothing outside the delegating call.

Keys nest under the run's owner key: the root agent's session is the owner
key itself (unchanged from an adapter used without sub-agents); a sub-agent's
is ``<parent key>/<name>@<call>``, one level per delegation, where ``<call>`` is
the delegating tool call's id. Each delegated run is one invocation with a
session of its own: two runs of one sub-agent, at once or one after the other,
never share a plan, and a durable engine's retry of the same call finds the
same session. An id longer than 40 characters, or with characters other than
letters, digits, ``-`` and ``_``, is shortened to 12 hex digits of its SHA-256,
so keys stay short enough for a file name; with no id, the key is
``<parent key>/<name>``. Each sub-agent's session is linked once
(``Binding.alinked``) to its parent's, with the parent's tool-call id.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

__all__ = ["Delegation", "delegating", "nested_owner"]

_UNNAMED = "agent"


@dataclass(frozen=True)
class Delegation:
    """Where the delegating agent's session sits below the owner key (no segments: the root
    agent's), and the tool call it delegates in."""

    path: tuple[str, ...]
    call_id: str | None


_DELEGATION: ContextVar[Delegation | None] = ContextVar("dsh_tool_todo_delegation", default=None)
_PLAIN_ID = re.compile(r"[A-Za-z0-9_-]{1,40}")


@contextmanager
def delegating(agent_name: str | None, call_id: str | None) -> Iterator[None]:
    """Mark the running tool call of ``agent_name`` as one that may run sub-agents."""
    outer = _DELEGATION.get()
    path = () if outer is None else (*outer.path, _segment(agent_name, outer.call_id))
    token = _DELEGATION.set(Delegation(path, call_id or None))
    try:
        yield
    finally:
        _DELEGATION.reset(token)


def nested_owner(owner: str, agent_name: str | None) -> tuple[str, tuple[str, str | None] | None]:
    """The owner key of ``agent_name``'s session in this call, and its parent's owner key and
    tool-call id (``None`` outside any delegating call: the root's session is ``owner``)."""
    outer = _DELEGATION.get()
    if outer is None:
        return owner, None
    parent = "/".join((owner, *outer.path))
    return f"{parent}/{_segment(agent_name, outer.call_id)}", (parent, outer.call_id)


def _segment(agent_name: str | None, call_id: str | None) -> str:
    """A delegated run's part of its key: the agent's name and the delegating call."""
    name = agent_name or _UNNAMED
    if not isinstance(call_id, str) or not call_id:
        return name
    if _PLAIN_ID.fullmatch(call_id) is None:
        digest = hashlib.sha256(call_id.encode("utf-8", "surrogatepass")).hexdigest()
        call_id = digest[:12]
    return f"{name}@{call_id}"
