"""Who a sub-agent under a lead is, as every plan tree names it, and the tree read once.

A sub-agent's attribution is the same in each format that carries it (A2A
artifact metadata, AI SDK data parts, the MCP tree resource)::

    {"session": "<its key>", "name": "<agent>", "parent": "<parent's key>",
     "parentCallId": "<delegating call>" | None, "end": None | {"outcome": ..., "error": ...}}

and ``"unreadable": {"message", "code"}`` when its log can no longer be read.
The session's place comes from the fleet's tree of links
(:func:`~dsh_tool_todo.plans.fleet.descendants` of the reader's rows), its
call id from its head link, its end from
:func:`~dsh_tool_todo.plans._follow_tree.ended_by`: the reads the fleet view
and ``dsh-todo sessions`` make, and no other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..core.links import End, link_of
from ..errors import InvalidLog, SessionNotFound, UsageError
from ..protocols import LogReader
from ._ag_ui_tree import agent_name
from ._follow_tree import LIST_LIMIT, ended_by
from .fleet import _end_json, descendants
from .wire import plan_of

__all__: list[str] = []


@dataclass(frozen=True)
class Agent:
    """A session under the lead: its key, its agent's name, its parent's key, the call."""

    session: str
    name: str
    parent: str
    call_id: str | None


async def placed(reader: LogReader, name: str, parent: str) -> Agent:
    """Session ``name`` under ``parent``: its agent's name, from its key and its parent's
    (as the adapters key them), and the delegating call its head link names."""
    owner_of = reader.owner_of
    agent = agent_name(owner_of(name) or name, owner_of(parent) or parent)
    try:
        head = await reader.tail(name, before=1, limit=1)
    except (InvalidLog, SessionNotFound, OSError):  # its follower or reader says what is wrong
        return Agent(name, agent, parent, None)
    link = link_of(head.events[0]) if head.events and head.events[0]["seq"] == 0 else None
    return Agent(name, agent, parent, None if link is None else link.parent_call_id)


def agent_json(
    agent: Agent, end: End | None, unreadable: dict[str, str] | None = None
) -> dict[str, Any]:
    """The attribution of ``agent``'s plan (the keys above)."""
    found: dict[str, Any] = {
        "session": agent.session,
        "name": agent.name,
        "parent": agent.parent,
        "parentCallId": agent.call_id,
        "end": _end_json(end),
    }
    if unreadable is not None:
        found["unreadable"] = unreadable
    return found


def unreadable_json(name: str, error: Exception) -> dict[str, str]:
    """What a log that can no longer be read says: the message and the code the web view's
    streams give (``session_deleted``, ``invalid_log``, ``read_failed``)."""
    if isinstance(error, SessionNotFound):  # it carries only the name: say what happened
        return {"message": f"session {name!r}: its log was deleted", "code": "session_deleted"}
    code = "invalid_log" if isinstance(error, (InvalidLog, UsageError)) else "read_failed"
    return {"message": str(error), "code": code}


async def read_tree(reader: LogReader, lead: str) -> list[dict[str, Any]]:
    """Each session under ``lead`` (each after its parent): its attribution and its plan now
    (``todos``, ``[]`` for none); one deleted since it was listed is left out."""
    rows, _ = await reader.sessions("", LIST_LIMIT)
    tree: list[dict[str, Any]] = []
    for name, parent in descendants(rows, lead):
        agent = await placed(reader, name, parent)
        try:
            snapshot = await reader.snapshot(name)
            end = await ended_by(reader, name, snapshot)
            todos = plan_of(snapshot.deciding)
        except SessionNotFound:
            continue
        except (InvalidLog, UsageError, OSError) as error:  # a write no reader would show
            tree.append({**agent_json(agent, None, unreadable_json(name, error)), "todos": []})
            continue
        tree.append({**agent_json(agent, end), "todos": todos})
    return tree
