"""An opt-in reminder of the plan, for a host to re-inject after compacting the conversation.

Compaction drops the ``todo_write`` calls that carried the plan, yet the model
must send the whole list on its next call. A host that compacts can add this
text (as a system or user message) so the model still holds the list. Nothing
here changes the tool, its description or its results.

>>> plan_reminder([]) is None
True
>>> print(plan_reminder([{"content": "Test it", "status": "in_progress"}]).splitlines()[1])
- [in_progress] Test it
"""

from __future__ import annotations

from .checklist import Todos, escape_content, plan_items

# Model-visible and kept byte-stable: the reminder sits in the prompt, and a
# changed byte breaks the prefix cache of every conversation that carries it.
REMINDER_HEADER = (
    "Your current todo_write plan, carried over from before the conversation was compacted:"
)
REMINDER_ITEM = "- [{status}] {content}"
REMINDER_FOOTER = (
    "To change the plan, call todo_write with the ENTIRE list, every todo with its status: "
    "each call replaces the previous list."
)


def plan_reminder(todos: Todos | None) -> str | None:
    """The plan as a short, stable text block; ``None`` when there is no plan or it is empty.

    Each todo is one line with its status word as the model sends it. Content is
    escaped as on the checklist, so a newline in it cannot forge a line of the
    reminder. Raises :class:`~dsh_tool_todo.errors.UsageError` for a malformed list.
    """
    items = plan_items(todos)
    if not items:
        return None
    lines = [REMINDER_HEADER]
    lines.extend(
        REMINDER_ITEM.format(status=status, content=escape_content(content))
        for content, status in items
    )
    lines.append(REMINDER_FOOTER)
    return "\n".join(lines)
