"""The inputs every benchmark shares: todo lists shaped like a model's, and their raw JSON."""

from __future__ import annotations

import json
import sys
from typing import Any, Literal

if sys.version_info >= (3, 12):
    from typing import TypedDict
else:  # pydantic reads TypedDicts only from typing_extensions before 3.12
    from typing_extensions import TypedDict

from pydantic import ConfigDict, TypeAdapter

import dsh_tool_todo
from dsh_tool_todo.host import Host

SIZES = (5, 20, 100)
CALL_SIZES = (6, 12, 100)  # the median and p99 plan length of real calls, and a long one
CONTENT_LENGTH = 43  # the median length of a real item's content
_FILLER = " and check that the tests still pass afterwards"
_VERBS = ("Read", "Update", "Write", "Test", "Refactor", "Document", "Review", "Benchmark")
_OBJECTS = ("the parser", "the session log", "the CLI", "the schema", "the docs", "the host")


class FloorTodo(TypedDict):
    """The floor's item type: the same two fields, in pydantic's default (lax) mode."""

    content: str
    status: Literal["pending", "in_progress", "completed"]


class LimitTodo(TypedDict):
    """The limit's item type: the same fields, strict, unknown keys refused."""

    __pydantic_config__ = ConfigDict(extra="forbid", strict=True)  # type: ignore[misc]
    content: str
    status: Literal["pending", "in_progress", "completed"]


class LimitArgs(TypedDict):
    __pydantic_config__ = ConfigDict(extra="forbid", strict=True)  # type: ignore[misc]
    todos: list[LimitTodo]


def limit_validator() -> Any:
    """One strict ``validate_json`` pass over the arguments: what every call must do.

    The core validator itself, without ``TypeAdapter``'s Python layer, so the
    limit is as low as pydantic allows.
    """
    return TypeAdapter(LimitArgs).validator


def real_todos(size: int, variant: int = 0) -> list[dict[str, str]]:
    """``todos(size, variant)`` with every content padded or cut to 43 characters."""
    items = todos(size, variant)
    for item in items:
        item["content"] = (item["content"] + _FILLER)[:CONTENT_LENGTH]
    return items


def real_args(size: int, variant: int = 0) -> str:
    return json.dumps({"todos": real_todos(size, variant)})


def todos(size: int, variant: int = 0) -> list[dict[str, str]]:
    """A plan of ``size`` steps: the first third done, one in progress, the rest pending."""
    done = size // 3
    items = []
    for index in range(size):
        verb = _VERBS[(index + variant) % len(_VERBS)]
        thing = _OBJECTS[(index * 7 + variant) % len(_OBJECTS)]
        status = "completed" if index < done else "in_progress" if index == done else "pending"
        items.append(
            {"content": f"{verb} {thing} (step {index + 1}, v{variant})", "status": status}
        )
    return items


def raw_args(size: int, variant: int = 0) -> str:
    """The arguments as the model sends them: one JSON text."""
    return json.dumps({"todos": todos(size, variant)})


def new_host(*, parallel: bool = False) -> Host:
    return Host([dsh_tool_todo], {"dsh-tool-todo": {"allowParallelInProgress": parallel}})


def write_event(size: int, variant: int = 0) -> dict[str, Any]:
    return {"type": "todo/write", "data": {"todos": todos(size, variant)}}


class KeyedSession:
    """A session that gives each ``todo/write`` the next call id, as a host passing the
    framework's tool-call ids does: what the stores' once-per-turn check costs a call.

    With ``keyed=False`` it copies the data the same way and adds no id: the reference,
    so that what this wrapper itself costs is on both sides.
    """

    def __init__(self, session: Any, *, keyed: bool = True) -> None:
        self._session = session
        self._keyed = keyed
        self._calls = 0

    def append(self, type: str, data: Any, /) -> Any:
        if type == "todo/write":
            self._calls += 1
            call = f"call_{self._calls}"
            data = {**data, "callId": call} if self._keyed else {**data}
        return self._session.append(type, data)

    def subscribe(self, listener: Any, /) -> Any:
        return self._session.subscribe(listener)

    def latest(self, types: Any, /) -> Any:
        return self._session.latest(types)
