"""When an adapter re-surfaces the plan: the model can no longer see it in its messages.

A compaction (a summary in place of old turns, a trimmed history) drops the
``todo_write`` calls that carried the plan. Rather than recognise each
framework's way of compacting, an adapter asks one question of the messages the
model is about to read: does any ``todo_write`` call, or an earlier reminder,
still show the current plan? If not, the reminder is due, once: appended after
the newest message, it shows the plan from then on.

Each adapter only reads its framework's messages (the ``todos`` of each
``todo_write`` call, the text of each user message) and puts the text after the
newest one; the plan itself comes from the owner's session (:func:`plan_in`).
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Iterable
from typing import Any

from ..core.contract import EVENT_TYPE, TURN_START
from ..errors import UsageError
from ..plans.checklist import Todos
from ..plans.reminder import plan_reminder
from ._binding import OwnerRegistry

__all__ = ["aplan_in", "aplan_of", "plan_in", "reminder_due", "todos_of"]


def plan_in(session: Any) -> Todos | None:
    """The current plan of ``session``: its latest ``todo/write``; ``None`` after a
    ``turn/start`` (a new turn clears the plan) or before any write."""
    return _plan(session.latest((EVENT_TYPE, TURN_START)))


def _plan(event: Any) -> Todos | None:
    if event is None or event["type"] != EVENT_TYPE:
        return None
    todos: Todos = event["data"]["todos"]
    return todos


async def aplan_of(owners: OwnerRegistry, owner: str) -> Todos | None:
    """:func:`plan_in` for ``owner`` of ``owners``, read under the owner's lock
    (a session's ``latest`` may be a coroutine)."""
    async with owners.alocked(owner) as session:
        return await aplan_in(session)


async def aplan_in(session: Any) -> Todos | None:
    """:func:`plan_in` for a session whose ``latest`` may be a coroutine."""
    found: Any = session.latest((EVENT_TYPE, TURN_START))
    return _plan(await found if inspect.isawaitable(found) else found)


def todos_of(arguments: object) -> object:
    """The ``todos`` of a call's arguments, as a dict or as JSON text; ``None`` if neither."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:  # arguments that are not JSON show no plan
            return None
    return arguments.get("todos") if isinstance(arguments, dict) else None


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
