"""The pure core: turn a model's arguments into the canonical result, or reject them.

Checks run in the order the contract fixes: the schema, then each item, then the
whole list. Ownership is checked by the tool before this runs.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
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
    # The core validator itself: TypeAdapter's own methods add a Python layer per call.
    validator = args_adapter().validator
    try:
        if isinstance(args, (str, bytes, bytearray)):
            return validator.validate_json(args)["todos"]  # type: ignore[no-any-return]
        if isinstance(args, Mapping) and not isinstance(args, dict):
            args = dict(args)
        return validator.validate_python(args)["todos"]  # type: ignore[no-any-return]
    except ValidationError as error:
        if isinstance(args, (str, bytes, bytearray)):
            return _parse_decoded(args, error)
        raise rejection_for(error, raw_json=False) from None


def _parse_decoded(text: str | bytes | bytearray, error: ValidationError) -> list[TodoItem]:
    """Python's parser reads some texts pydantic's refuses (escaped lone surrogates,
    NaN): judge those by what they decode to."""
    if error.errors()[0]["type"] == "json_invalid":
        try:
            decoded = json.loads(text)
        except (ValueError, RecursionError):
            pass
        else:
            return parse_todos(decoded)
    raise rejection_for(error, raw_json=True) from None


def check_todos(todos: list[TodoItem], *, allow_parallel: bool) -> TodoResult:
    """Apply the item and list rules to a well-formed list and count it."""
    pending = in_progress = 0
    contents: set[str] = set()
    for item in todos:  # one pass: this is the per-call hot path
        content = item["content"]
        if not content or content.isspace():
            raise ToolCallRejected(EMPTY_CONTENT)
        contents.add(content)
        status = item["status"]
        if status == "pending":
            pending += 1
        elif status == "in_progress":
            in_progress += 1
    if len(contents) != len(todos):  # list rules only once every item has passed
        repeated = _first_repeat(item["content"] for item in todos)
        raise ToolCallRejected(DUPLICATE_CONTENT.format(content=printable(repeated)))
    if in_progress > 1 and not allow_parallel:
        raise ToolCallRejected(TOO_MANY_IN_PROGRESS.format(count=in_progress))
    completed = len(todos) - pending - in_progress
    counts = {"pending": pending, "inProgress": in_progress, "completed": completed}
    return {"todos": todos, "counts": counts}  # type: ignore[typeddict-item]


def _first_repeat(contents: Iterable[str]) -> str:
    seen: set[str] = set()
    for content in contents:
        if content in seen:
            return content
        seen.add(content)
    raise AssertionError("no repeated content")


def validate_call(args: Any, *, allow_parallel: bool) -> TodoResult:
    """The whole validation of one call, from raw arguments to the canonical result."""
    return check_todos(parse_todos(args), allow_parallel=allow_parallel)
