"""An opt-in reminder of the plan, for a host to re-inject after compacting the conversation.

Compaction drops the ``todo_write`` calls that carried the plan, yet the model
must send the whole list on its next call. A host that compacts can add this
text so the model still holds the list. Nothing here changes the tool, its
description or its results.

The todos are model-written data, copied into the text (escaped, and cut to
:data:`REMINDER_MAX_ITEMS` items of at most :data:`REMINDER_MAX_CONTENT`
characters): put the reminder in a user message or a clearly delimited block,
not among the host's own system instructions.

>>> plan_reminder([]) is None
True
>>> print(plan_reminder([{"content": "Test it", "status": "in_progress"}]).splitlines()[1])
- [in_progress] Test it
"""

from __future__ import annotations

from collections.abc import Sequence

from ..core.contract import (
    REMINDER_FOOTER,
    REMINDER_HEADER,
    REMINDER_ITEM,
    REMINDER_LEFT_OUT,
    REQUEST_NOTICE_FOOTER,
    REQUEST_NOTICE_HEADER,
    REQUEST_NOTICE_ITEMS,
)
from ..core.requests import MAX_TOLD, Request
from .checklist import Todos, escape_content, plan_items

__all__ = [
    "REMINDER_MAX_CONTENT",
    "REMINDER_MAX_ITEMS",
    "plan_reminder",
    "request_notice",
]

# Model-visible: the texts live with every other one in contract.py.
REMINDER_MAX_ITEMS = 50  # real plans: median 6 items, largest seen 22
REMINDER_MAX_CONTENT = 300  # characters of escaped content per item (real p99: 126)


def plan_reminder(todos: Todos | None) -> str | None:
    """The plan as a short, stable text block; ``None`` when there is no plan or it is empty.

    Each todo is one line with its status word as the model sends it. Content is
    escaped as on the checklist, so a newline in it cannot forge a line of the
    reminder, and cut with ``…`` past :data:`REMINDER_MAX_CONTENT` characters;
    past :data:`REMINDER_MAX_ITEMS` todos, one line says how many were left
    out. Raises :class:`~dsh_tool_todo.errors.UsageError` for a malformed list.
    """
    items = plan_items(todos)
    if not items:
        return None
    lines = [REMINDER_HEADER]
    lines.extend(
        REMINDER_ITEM.format(status=status, content=_cut(content))
        for content, status in items[:REMINDER_MAX_ITEMS]
    )
    if len(items) > REMINDER_MAX_ITEMS:
        lines.append(REMINDER_LEFT_OUT.format(count=len(items) - REMINDER_MAX_ITEMS))
    lines.append(REMINDER_FOOTER)
    return "\n".join(lines)


def request_notice(requests: Sequence[Request]) -> str | None:
    """The notice that tells the model what a person asked (``None`` for no request).

    At most ``core.requests.MAX_TOLD`` requests, each one line; contents are
    escaped and cut as the reminder's are, so a request cannot forge a line.

    >>> from dsh_tool_todo.core.requests import Request
    >>> print(request_notice([Request("r1", "done", "Ship it", "ada", 3, 0.0)]))
    The user watching your todo list asks:
    - mark "Ship it" completed
    Answer with todo_write (the ENTIRE list) or say why not.
    """
    if not requests:
        return None
    lines = [REQUEST_NOTICE_HEADER]
    lines.extend(
        REQUEST_NOTICE_ITEMS[r.kind].format(content=_cut(r.content)) for r in requests[:MAX_TOLD]
    )
    lines.append(REQUEST_NOTICE_FOOTER)
    return "\n".join(lines)


def _cut(content: str) -> str:
    # Cut before escaping too, so a huge content costs no more than a short one.
    escaped = escape_content(content[: REMINDER_MAX_CONTENT + 1])
    if len(content) > REMINDER_MAX_CONTENT or len(escaped) > REMINDER_MAX_CONTENT:
        return escaped[: REMINDER_MAX_CONTENT - 1] + "…"
    return escaped
