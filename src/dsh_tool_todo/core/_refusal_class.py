"""The class of a refused call, read back from the text the model got: for tracers and logs.

Every refusal text is built from the templates in :mod:`.contract` (tested byte for byte), and
the first clause is the first failing check (_rejections.py orders them: the schema clauses,
then the item and list clauses). So the class is decided by the text's head and first clause
alone, with nothing added to the tool's path: reading the text costs only a refused call.

Where each refusal is decided:

- ``no_owner``: the tool, before any check (``tool.py``: no agent in the exec context);
- ``unknown_key``, ``invalid_status``, ``stringified_array``: pydantic refuses the schema and
  ``_rejections.Findings.walk`` names the problems (``UNKNOWN_ARGUMENTS``,
  ``UNKNOWN_ITEM_KEYS``, ``RENAME_FIELD``, ``SEND_AS_TODOS``; ``BAD_STATUS``;
  ``TODOS_IS_STRING``, ``SEND_PARSED_AS_TODOS``);
- ``empty_content``, ``duplicate_content``, ``too_many_in_progress``: the schema accepts and
  the list rules refuse (``_validation._counted``, texts from ``_rejections.list_refusal``);
- ``not_recorded``: not a refusal but a failure to record (:class:`~.errors.ToolFailure`);
  it has no text of its own here, callers that catch the failure use it;
- :data:`OTHER` (``_OTHER``, OpenTelemetry's fallback for ``error.type``): every other refusal
  (not JSON, not an object, ``todos`` missing or not an array, an item not an object, a missing
  field, a ``content`` that is not a string, a value JSON never holds).

The set is part of the public contract: adding a class is a minor version.
"""

from __future__ import annotations

import re
from string import Formatter

from . import contract as text

__all__ = ["NOT_RECORDED_CLASS", "OTHER", "REFUSAL_CLASSES", "refusal_class"]

OTHER = "_OTHER"
NOT_RECORDED_CLASS = "not_recorded"
REFUSAL_CLASSES = (
    "unknown_key",
    "invalid_status",
    "stringified_array",
    "empty_content",
    "duplicate_content",
    "too_many_in_progress",
    "no_owner",
    NOT_RECORDED_CLASS,
)

# The first clause after a head, by template name, in the order they are tried (a template
# whose matched head is a prefix of another's comes after it).
_CLAUSES = (
    ("UNKNOWN_ARGUMENTS", "unknown_key"),
    ("UNKNOWN_ITEM_KEYS", "unknown_key"),
    ("MISSING_TODOS", OTHER),
    ("SEND_AS_TODOS", "unknown_key"),
    ("SEND_PARSED_AS_TODOS", "stringified_array"),
    ("TODOS_IS_STRING", "stringified_array"),
    ("TODOS_NOT_ARRAY", OTHER),
    ("ITEM_NOT_OBJECT", OTHER),
    ("RENAME_FIELD", "unknown_key"),
    ("MISSING_FIELD", OTHER),
    ("CONTENT_NOT_STRING", OTHER),
    ("BAD_STATUS", "invalid_status"),
    ("EMPTY_CONTENT_AT", "empty_content"),
    ("DUPLICATE", "duplicate_content"),
    ("TOO_MANY", "too_many_in_progress"),
    ("NOT_JSON", OTHER),
    ("ARGS_NOT_OBJECT", OTHER),
    ("UNEXPECTED_VALUE", OTHER),
)

# What a template's fields may hold up to the first echoed (model-controlled) one, where the
# match stops: the head before it is all contract text.
_FIELDS = {
    "field": "(?:content|status)",
    "where": "[^:;(]*",  # the WHERE_ texts: no colon, semicolon or parenthesis
    "s": "s?",
    "index": "[0-9]+",
    "count": "[0-9]+",
}


def _head_pattern(template: str) -> str:
    """The regex of ``template`` up to its first echoed field."""
    pieces: list[str] = []
    for literal, field, _spec, _conversion in Formatter().parse(template):
        pieces.append(re.escape(literal))
        if field is None:
            continue
        if field not in _FIELDS:
            break
        pieces.append(_FIELDS[field])
    return "".join(pieces)


def _clause_of(template: str) -> str:
    """A clause as it appears after a head: the NOT_JSON and ARGS_NOT_OBJECT texts are whole
    texts that begin with the call head."""
    return template.removeprefix(text.CALL_HEAD)


_CLAUSE_PATTERNS = tuple(
    (re.compile(_head_pattern(_clause_of(getattr(text, name)))), kind) for name, kind in _CLAUSES
)
_ITEM_HEAD = re.compile(_head_pattern(text.ITEM_HEAD))


def refusal_class(refused: str) -> str:
    """The class of a refusal text: one of :data:`REFUSAL_CLASSES` or :data:`OTHER`.

    >>> refusal_class('Error: invalid todos: duplicate content "Plan"')
    'duplicate_content'
    >>> refusal_class("Error: invalid todo at index 0: `status` must be one of pending, "
    ...     'in_progress, completed (got "done": use completed)')
    'invalid_status'
    """
    if refused == text.NO_OWNER:
        return "no_owner"
    if refused.startswith(text.EMPTY_CONTENT):
        return "empty_content"
    if refused.startswith(text.CALL_HEAD):
        clause = refused[len(text.CALL_HEAD) :]
    else:
        head = _ITEM_HEAD.match(refused)
        if head is None:
            return OTHER
        clause = refused[head.end() :]
    for pattern, kind in _CLAUSE_PATTERNS:
        if pattern.match(clause):
            return kind
    return OTHER
