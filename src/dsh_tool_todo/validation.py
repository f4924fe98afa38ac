"""The pure core: turn a model's arguments into the canonical result, or reject them.

Checks run in the order the contract fixes: the schema, then each item, then the
whole list. Ownership is checked by the tool before this runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any

from pydantic import TypeAdapter, ValidationError

from .contract import DUPLICATE_CONTENT, EMPTY_CONTENT, TOO_MANY_IN_PROGRESS
from .errors import ToolCallRejected
from .model import TodoItem, TodoResult, TodoWriteArgs
from .rejections import printable, rejection_for


@cache
def args_adapter() -> TypeAdapter[TodoWriteArgs]:
    return TypeAdapter(TodoWriteArgs)


def parse_todos(args: object) -> list[TodoItem]:
    """Validate the arguments' shape: a JSON text, or an already decoded mapping."""
    adapter = args_adapter()
    raw_json = isinstance(args, (str, bytes, bytearray))
    try:
        if isinstance(args, (str, bytes, bytearray)):
            return adapter.validate_json(args)["todos"]
        if isinstance(args, Mapping) and not isinstance(args, dict):
            args = dict(args)
        return adapter.validate_python(args)["todos"]
    except ValidationError as error:
        raise rejection_for(error, raw_json=raw_json) from None


def check_todos(todos: list[TodoItem], *, allow_parallel: bool) -> TodoResult:
    """Apply the item and list rules to a well-formed list and count it."""
    pending = in_progress = 0
    seen: set[str] = set()
    duplicate: str | None = None
    for item in todos:
        content = item["content"]
        if not content or content.isspace():
            raise ToolCallRejected(EMPTY_CONTENT)
        if content in seen:
            if duplicate is None:
                duplicate = content
        else:
            seen.add(content)
        status = item["status"]
        if status == "pending":
            pending += 1
        elif status == "in_progress":
            in_progress += 1
    if duplicate is not None:
        raise ToolCallRejected(DUPLICATE_CONTENT.format(content=printable(duplicate)))
    if in_progress > 1 and not allow_parallel:
        raise ToolCallRejected(TOO_MANY_IN_PROGRESS.format(count=in_progress))
    completed = len(todos) - pending - in_progress
    counts = {"pending": pending, "inProgress": in_progress, "completed": completed}
    return {"todos": todos, "counts": counts}  # type: ignore[typeddict-item]


def validate_call(args: Any, *, allow_parallel: bool) -> TodoResult:
    """The whole validation of one call, from raw arguments to the canonical result."""
    return check_todos(parse_todos(args), allow_parallel=allow_parallel)
