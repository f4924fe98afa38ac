"""What the tests build again and again: a todo, a call's arguments, an event of the log.

Event types come from the contract (:data:`EVENT_TYPE`, :data:`TURN_START`), so a test spells
``todo/write`` out only where the spelling itself is what it checks. Fixtures stay in
``conftest.py``; these are plain functions, imported by name.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dsh_tool_todo.core.contract import EVENT_TYPE, TURN_START

Todo = dict[str, str]
Event = dict[str, Any]

# One small plan of each status, for the frontends' snapshot tests.
PLAN: list[Todo] = [
    {"content": "Read the report command", "status": "completed"},
    {"content": "Add the --json flag", "status": "in_progress"},
    {"content": "Write tests", "status": "pending"},
]

# Two plans of one task in the order a model writes them: started, then a step further.
PLAN_A: list[Todo] = [
    {"content": "Read the code", "status": "in_progress"},
    {"content": "Fix the bug", "status": "pending"},
]
PLAN_B: list[Todo] = [
    {"content": "Read the code", "status": "completed"},
    {"content": "Fix the bug", "status": "in_progress"},
]

_EMPTY: Any = object()


def options(parallel: bool) -> dict[str, dict[str, bool]]:
    """The plugin's options for a host: ``allowParallelInProgress`` set to ``parallel``."""
    return {"dsh-tool-todo": {"allowParallelInProgress": parallel}}


def todo(content: str, status: str = "pending") -> Todo:
    """One item of a plan."""
    return {"content": content, "status": status}


def todos(*items: Todo) -> dict[str, list[Todo]]:
    """``{"todos": [...]}``: a call's arguments, and the data of the write it records."""
    return {"todos": list(items)}


def plan(*contents: str, status: str = "pending") -> dict[str, list[Todo]]:
    """A call's arguments (and the data of the write it records): a todo of ``status`` for
    each of ``contents``."""
    return todos(*(todo(content, status) for content in contents))


def make_event(type: str, data: Any = _EMPTY, *, seq: int | None = None) -> Event:
    """An event as a session records it (``data`` ``{}`` unless given; ``seq`` when given)."""
    built: Event = {} if seq is None else {"seq": seq}
    built["type"] = type
    built["data"] = {} if data is _EMPTY else data
    return built


def todo_write(*items: Todo, seq: int | None = None) -> Event:
    """A ``todo/write`` event recording ``items``."""
    return make_event(EVENT_TYPE, todos(*items), seq=seq)


def turn_start(*, seq: int | None = None) -> Event:
    """A ``turn/start`` event: the plan it follows is over."""
    return make_event(TURN_START, seq=seq)


def written_plans(session: Any) -> list[Any]:
    """The plans of the ``todo/write`` events ``session`` recorded, in order."""
    return [event["data"]["todos"] for event in session.events if event["type"] == EVENT_TYPE]


def write_log(path: Path, events: Sequence[tuple[str, Any]], **link: Any) -> list[Event]:
    """Append ``events`` (type, data) to the JSONL log at ``path`` through the real writer,
    ``link`` (``parent=``, ``parent_call_id=``) linking it to a lead; the events as recorded."""
    from dsh_tool_todo.stores.jsonl import JsonlSession

    with JsonlSession(path, **link) as session:
        return [session.append(kind, data) for kind, data in events]


# A lead and its sub-agents are keyed as the adapters key them (``<parent>/<agent>@<call>``)
# in an owner registry's directory.


def owner_stem(key: str) -> str:
    """The name a directory's reader lists owner ``key``'s log under."""
    from dsh_tool_todo.stores.owners import owner_file_name

    return owner_file_name(key).removesuffix(".jsonl")


def write_owner_log(directory: Path, key: str, *events: tuple[str, Any], **link: Any) -> None:
    """Append ``events`` to owner ``key``'s log in ``directory`` (:func:`write_log`)."""
    from dsh_tool_todo.stores.owners import owner_file_name

    write_log(directory / owner_file_name(key), events, **link)


def one_item_plan(content: str, status: str = "in_progress") -> tuple[str, dict[str, list[Todo]]]:
    """A ``todo/write`` of the one item ``content``, as (type, data)."""
    return (EVENT_TYPE, todos(todo(content, status)))
