"""The accepted call, decoded faster: a shortcut that can only ever say yes.

Nearly every call the model makes is valid. For those, pydantic's strict
``validate_json`` builds its own tree of the text and then a new dict for each
item, and the item rules walk the list once more. :func:`accept_counted` decodes
the text once with pydantic-core's JSON parser (the one ``validate_json`` itself
uses, so strings, escapes and repeated keys read the same) and checks the schema
and the item and list rules in one Python pass over what it decoded.

It answers only for a call it accepts whole, with exactly the result the full
validation gives. For anything else (a wrong type, an unknown key, an empty or
repeated content, a lone surrogate, ``NaN``, a text the parser refuses, items
whose keys are not written ``content`` first) it answers ``None``, and the
caller runs the full validation, which stays the single judge of what is
refused and of every text the model reads.

Key order: pydantic builds each item as ``{content, status}``, whatever order
the model wrote. The decoded item keeps the written order, so it is used as it
is only when its first key is ``content``; an item written ``status`` first is
left to the full validation.
"""

from __future__ import annotations

from typing import get_args

from pydantic_core import from_json

from .model import Status, TodoItem, TodoResult

# The keys and statuses as the parser's own string objects: it hands out one shared object
# per short string it has seen, so the lookups and comparisons below find the very object (a
# pointer compare) where an equal string would be compared character by character. Should
# the parser ever hand out another object, they still compare equal: only speed depends on it.
_CONTENT, _STATUS = from_json('{"content":0,"status":0}')
_PENDING, _IN_PROGRESS, _COMPLETED = from_json('["pending","in_progress","completed"]')

Counted = tuple[dict[str, list[TodoItem]], tuple[int, int, int]]
"""Accepted arguments ``{todos}``, the event's data as is, and the list's counts:
``(data, (pending, in_progress, completed))``."""


def accept_counted(raw: str | bytes, allow_parallel: bool) -> Counted | None:
    """A valid call's raw JSON arguments, counted, or ``None``, which means "run the full
    validation" (never "refused")."""
    try:
        args = from_json(raw)  # strings cached as validate_json caches them: repeats shared
    except (ValueError, TypeError):  # TypeError: a str holding a lone surrogate has no UTF-8
        return None
    if type(args) is not dict or len(args) != 1:
        return None
    todos = args.get("todos")
    if type(todos) is not list:
        return None
    contents: set[str] = set()
    add = contents.add
    pending = in_progress = 0
    # A non-dict item, more or fewer than two keys, a missing key, or a content that is not
    # a str (no isspace; only a str reaches the set) raises: not accepted.
    try:
        for item in todos:
            first, _ = item  # a dict unpacks into its keys, in the order written
            if first != _CONTENT:
                return None
            content = item[_CONTENT]
            if not content or content.isspace():
                return None
            add(content)
            status = item[_STATUS]
            if status == _PENDING:
                pending += 1
            elif status == _IN_PROGRESS:
                in_progress += 1
            elif status != _COMPLETED:  # only a str equals one; anything else is refused
                return None
    except (KeyError, TypeError, ValueError, AttributeError):
        return None
    count = len(todos)
    if len(contents) != count or (in_progress > 1 and not allow_parallel):
        return None
    return args, (pending, in_progress, count - pending - in_progress)


_STATUSES = frozenset(get_args(Status))


def accepts_logged(todos: object) -> bool:
    """Whether a logged ``todo/write``'s decoded ``todos`` passes the full validation with
    any number of items in progress. ``True`` only when it does; ``False`` means "ask the
    full validation", never "refused".

    What a viewer checks of every deciding event it reads: exact types only (a ``dict`` of
    exactly ``content`` and ``status``, ``str`` values), so what it accepts pydantic's
    strict schema accepts too, and building pydantic's validator waits for a log that
    needs it (a server's first list read 200 logs and paid for it on the first request).
    """
    if type(todos) is not list:
        return False
    contents = set()
    for item in todos:
        if type(item) is not dict or len(item) != 2:
            return False
        content = item.get("content")
        status = item.get("status")
        if type(content) is not str or type(status) is not str or status not in _STATUSES:
            return False
        if not content or content.isspace():
            return False
        contents.add(content)
    return len(contents) == len(todos)


def as_result(counted: Counted) -> TodoResult:
    """The canonical result of an accepted, counted list."""
    data, (pending, in_progress, completed) = counted
    counts = {"pending": pending, "inProgress": in_progress, "completed": completed}
    return {"todos": data["todos"], "counts": counts}  # type: ignore[typeddict-item]
