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
sub-agent's session is linked once (``OwnerRegistry.alink``) to its parent's,
with the parent's tool-call id.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from ..core.links import link_data
from ..core.listeners import LOGGER_NAME
from ..errors import UsageError
from ..stores.owners import OwnerRegistry

__all__ = ["Delegation", "OwnerLinks", "delegating", "nested_owner"]

_UNNAMED = "agent"
_log = logging.getLogger(LOGGER_NAME)


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


class OwnerLinks:
    """Links each sub-agent's session to its parent's once per tool (then the log holds it)."""

    __slots__ = ("_done", "registry")

    def __init__(self, registry: OwnerRegistry) -> None:
        self.registry = registry
        self._done: set[str] = set()

    async def owner_of(self, owner: str, agent_name: str | None) -> str:
        """The owner key this call runs under, its link recorded first when it is a sub-agent's."""
        key, parent = nested_owner(owner, agent_name)
        if parent is not None and key not in self._done:
            parent_owner, call_id = parent
            parent_key = self.registry.key(parent_owner)
            try:
                link_data("parent", call_id)  # the call id alone: a bad key still fails below
            except UsageError as error:  # a framework's call id: never a reason to fail the run
                _log.warning("sub-agent %r is linked without its parent's call id: %s", key, error)
                call_id = None
            await self.registry.alink(key, parent_key, parent_call_id=call_id)
            self._done.add(key)
        return key
