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

When the delegating call returns, the wrapper appends ``session/end``
(:func:`~dsh_tool_todo.core.links.end_data`: ``finished``) to each sub-agent
session opened during it; when it raises, ``failed`` with the error's text, and
the error goes on as it was. A session opened by a deeper delegating call is
ended by that call's wrapper. An end that cannot be written is logged (WARNING,
logger ``dsh_tool_todo``) and never fails the parent's call: the parent's run
matters more than a viewer's line.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import logging
import re
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..core.contract import SESSION_END_EVENT_TYPE
from ..core.links import end_data
from ..core.listeners import LOGGER_NAME

__all__ = ["Delegation", "delegating", "nested_owner", "opened"]

_UNNAMED = "agent"
_log = logging.getLogger(LOGGER_NAME)


class _Owners(Protocol):
    """What ending a session asks of the registry that holds it."""

    def alocked(self, owner: str, /) -> AbstractAsyncContextManager[Any]: ...


@dataclass(frozen=True)
class Delegation:
    """Where the delegating agent's session sits below the owner key (no segments: the root
    agent's), the tool call it delegates in, and the sub-agent sessions opened under it
    (registry and owner key, in the order opened), which the call's end closes."""

    path: tuple[str, ...]
    call_id: str | None
    sessions: list[tuple[_Owners, str]] = field(default_factory=list, compare=False)


_DELEGATION: ContextVar[Delegation | None] = ContextVar("dsh_tool_todo_delegation", default=None)
_PLAIN_ID = re.compile(r"[A-Za-z0-9_-]{1,40}")


@asynccontextmanager
async def delegating(agent_name: str | None, call_id: str | None) -> AsyncIterator[Delegation]:
    """Mark the running tool call of ``agent_name`` as one that may run sub-agents; on the
    way out, end each sub-agent session opened under it (``failed`` when the call raised)."""
    outer = _DELEGATION.get()
    path = () if outer is None else (*outer.path, _segment(agent_name, outer.call_id))
    delegation = Delegation(path, call_id or None)
    token = _DELEGATION.set(delegation)
    try:
        yield delegation
    except (Exception, asyncio.CancelledError) as error:
        _DELEGATION.reset(token)
        await _end(delegation, "failed", str(error) or type(error).__name__)
        raise
    except BaseException:  # an interpreter exit: nothing is awaited on its way out
        _DELEGATION.reset(token)
        raise
    _DELEGATION.reset(token)
    await _end(delegation, "finished")


def opened(owners: _Owners, key: str) -> None:
    """Note that the sub-agent session ``key`` of ``owners`` runs under the current delegating
    call (no-op outside one), so that call's end closes it."""
    delegation = _DELEGATION.get()
    if delegation is None:
        return
    if not any(held is owners and found == key for held, found in delegation.sessions):
        delegation.sessions.append((owners, key))


async def _end(delegation: Delegation, outcome: str, error: str | None = None) -> None:
    """Append ``session/end`` to each session opened under ``delegation``; a failure is
    logged and the others are still ended."""
    data = end_data(outcome, error)
    for owners, key in delegation.sessions:
        try:
            async with owners.alocked(key) as session:
                appended = session.append(SESSION_END_EVENT_TYPE, data)
                if inspect.isawaitable(appended):
                    await appended
        except Exception as failure:
            _log.warning(
                "the end (%s) of sub-agent session %r was not recorded: %s", outcome, key, failure
            )


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
