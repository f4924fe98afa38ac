"""What the tests build again and again: a todo, a call's arguments, an event of the log.

Event types come from the contract (:data:`EVENT_TYPE`, :data:`TURN_START`), so a test spells
``todo/write`` out only where the spelling itself is what it checks. Fixtures stay in
``conftest.py``; these are plain functions, imported by name.
"""

from __future__ import annotations

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
