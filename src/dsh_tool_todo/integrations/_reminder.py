"""When an adapter re-surfaces the plan: the model can no longer see it in its messages.

A compaction (a summary in place of old turns, a trimmed history) drops the
``todo_write`` calls that carried the plan. Rather than recognise each
framework's way of compacting, an adapter asks one question of the messages the
model is about to read: does any ``todo_write`` call, or an earlier reminder,
still show the current plan? If not, the reminder is due, once: appended after
the newest message, it shows the plan from then on.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..checklist import Todos
from ..errors import UsageError
from ..reminder import plan_reminder

__all__ = ["reminder_due"]


def reminder_due(plan: Todos | None, written: Iterable[object], shown: Iterable[str]) -> str | None:
    """The reminder text to add, or ``None`` when there is no plan or the model still sees it.

    ``written`` holds the ``todos`` argument of each ``todo_write`` call still in
    the messages, ``shown`` the text of each user message. Comparing rendered
    reminders ignores how a call spelled its list; a refused or stale call
    shows a different list, so it does not count.
    """
    text = plan_reminder(plan)
    if text is None:
        return None
    if text in shown:
        return None
    for todos in written:
        try:
            if plan_reminder(todos) == text:  # type: ignore[arg-type]
                return None
        except UsageError:  # a malformed call shows no plan
            continue
    return text
