"""The pure core: turn a model's arguments into the canonical result, or reject them.

Checks run in the order the contract fixes: the schema, then each item, then the
whole list; the first failing check decides the text, which then names every other
problem it can see (_rejections.py). Ownership is checked by the tool before this runs.
The accepted path is one pydantic validation and one pass over the items; for a raw
JSON text, one decode by pydantic-core's parser and one pass (_accept.py), which can only
accept and leaves every refusal to pydantic.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cache
from typing import Any

from pydantic import TypeAdapter, ValidationError
from pydantic_core import ErrorDetails, from_json

from ..errors import ToolCallRejected
from ._accept import Counted, accept_counted, as_result
from .model import TodoItem, TodoResult, TodoWriteArgs


# A refusal's text is built only when a call is refused: the modules that word it load then,
# not with the package (a valid call never needs them).
def refusal(args: object, *, allow_parallel: bool, error: ValidationError) -> str:
    from ._rejections import refusal as worded

    return worded(args, allow_parallel=allow_parallel, error=error)


def list_refusal(todos: list[TodoItem], *, allow_parallel: bool) -> str:
    from ._rejections import list_refusal as worded

    return worded(todos, allow_parallel=allow_parallel)


def not_json(reason: str) -> str:
    from ._rejections import not_json as worded

    return worded(reason)


@cache
def args_adapter() -> TypeAdapter[TodoWriteArgs]:
    return TypeAdapter(TodoWriteArgs)


def parse_todos(args: object, *, allow_parallel: bool = True) -> list[TodoItem]:
    """Validate the arguments' shape: a JSON text, or an already decoded mapping.

    pydantic alone decides; only once it has refused does :func:`.rejections.refusal` walk
    the decoded arguments to name every problem (``allow_parallel`` lets that text also
    name too many ``in_progress`` items).
    """
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
            return _parse_decoded(args, error, allow_parallel=allow_parallel)
        raise ToolCallRejected(refusal(args, allow_parallel=allow_parallel, error=error)) from None


def _parse_decoded(
    raw: str | bytes | bytearray, error: ValidationError, *, allow_parallel: bool
) -> list[TodoItem]:
    """Python's parser reads some texts pydantic's refuses (escaped lone surrogates, NaN):
    judge those by what they decode to. Any other refusal is explained from the value
    pydantic's own parser reads."""
    first = _sole_error(error)
    if first is not None and first["type"] == "json_invalid":
        try:
            decoded = json.loads(raw)
        except (ValueError, RecursionError):
            reason = first.get("ctx", {}).get("error", "malformed")
            raise ToolCallRejected(not_json(str(reason))) from None
        return parse_todos(decoded, allow_parallel=allow_parallel)
    if first is not None and first["type"] == "string_unicode" and not first["loc"]:
        raise ToolCallRejected(not_json(_LONE_SURROGATE)) from None
    try:
        decoded = from_json(raw)  # the parser that read it: the same value pydantic judged
    except ValueError:
        raise ToolCallRejected(not_json(_LONE_SURROGATE)) from None
    raise ToolCallRejected(refusal(decoded, allow_parallel=allow_parallel, error=error)) from None


_LONE_SURROGATE = "it holds a lone surrogate, which is not text"


def _sole_error(error: ValidationError) -> ErrorDetails | None:
    """pydantic's error when it is the only one (a text that does not parse has exactly
    one); never materialise a long error list."""
    if error.error_count() != 1:
        return None
    return error.errors(include_url=False)[0]


def check_todos(todos: list[TodoItem], *, allow_parallel: bool) -> TodoResult:
    """Apply the item and list rules to a well-formed list and count it."""
    return as_result(_counted(todos, allow_parallel))


def _counted(todos: list[TodoItem], allow_parallel: bool) -> Counted:
    pending = in_progress = 0
    contents: set[str] = set()
    for item in todos:  # one pass
        content = item["content"]
        if not content or content.isspace():
            raise ToolCallRejected(list_refusal(todos, allow_parallel=allow_parallel))
        contents.add(content)
        status = item["status"]
        if status == "pending":
            pending += 1
        elif status == "in_progress":
            in_progress += 1
    if len(contents) != len(todos) or (in_progress > 1 and not allow_parallel):
        raise ToolCallRejected(list_refusal(todos, allow_parallel=allow_parallel))
    return {"todos": todos}, (pending, in_progress, len(todos) - pending - in_progress)


def validate_call(args: Any, *, allow_parallel: bool) -> TodoResult:
    """The whole validation of one call, from raw arguments to the canonical result.

    A valid raw JSON text takes a shortcut that can only accept (_accept.py); anything
    it does not accept whole goes through pydantic, the judge of every refusal.
    """
    return as_result(judge(args, allow_parallel))


def judge(args: Any, allow_parallel: bool) -> Counted:
    """:func:`validate_call`'s answer as a tuple ``({todos}, (pending, in_progress, completed))``:
    what the tool's hot path reads."""
    if type(args) is str or type(args) is bytes:
        counted = accept_counted(args, allow_parallel)
        if counted is not None:
            return counted
    return judge_fully(args, allow_parallel)


def judge_fully(args: Any, allow_parallel: bool) -> Counted:
    """:func:`judge` without the shortcut: for a caller that has already tried it."""
    return _counted(parse_todos(args, allow_parallel=allow_parallel), allow_parallel)
