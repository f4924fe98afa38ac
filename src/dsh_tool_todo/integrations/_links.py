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
is ``<owner>/<name>/<name>...``, the agent names below the root. Each
sub-agent's session is linked once (``Binding.alinked``) to its parent's,
with the parent's tool-call id.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

__all__ = ["Delegation", "delegating", "nested_owner"]

_UNNAMED = "agent"


@dataclass(frozen=True)
class Delegation:
    """The agents from the root to the one delegating, and the call it delegates in."""

    chain: tuple[str, ...]
    call_id: str | None


_DELEGATION: ContextVar[Delegation | None] = ContextVar("dsh_tool_todo_delegation", default=None)


@contextmanager
def delegating(agent_name: str | None, call_id: str | None) -> Iterator[None]:
    """Mark the running tool call of ``agent_name`` as one that may run sub-agents."""
    outer = _DELEGATION.get()
    chain = (outer.chain if outer is not None else ()) + (agent_name or _UNNAMED,)
    token = _DELEGATION.set(Delegation(chain, call_id or None))
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
    below_root = (*outer.chain[1:], agent_name or _UNNAMED)
    parent = owner if len(outer.chain) == 1 else "/".join((owner, *outer.chain[1:]))
    return "/".join((owner, *below_root)), (parent, outer.call_id)
