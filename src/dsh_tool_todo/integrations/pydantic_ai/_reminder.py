"""pydantic-ai's history processor re-surfacing the plan after a compaction."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from pydantic_ai import RunContext
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    ToolCallPart,
    UserPromptPart,
)

from ...core.contract import TOOL_NAME
from ...errors import UsageError
from ...plans.checklist import Todos
from .._reminder import plan_in, reminder_due
from ._call import _from_deps

if TYPE_CHECKING:
    from . import PlanOf

_HistoryProcessor = Callable[[RunContext[Any], list[ModelMessage]], Awaitable[list[ModelMessage]]]


def plan_reminder_processor(*, plan: PlanOf | None = None) -> _HistoryProcessor:
    """A history processor re-surfacing the plan after a compaction (opt-in).

    Pass it last in ``Agent(history_processors=[...])``, after the processor that
    summarises or trims. Before each model request, when the current plan is not
    empty and no ``todo_write`` call (nor an earlier reminder) left in the
    messages shows it, it adds :func:`~dsh_tool_todo.plans.reminder.plan_reminder` as a
    user prompt part at the end of the newest request; pydantic-ai keeps the
    processed history, so the reminder stays there and is added once. Nothing
    before the newest message changes, so the prefix a provider caches is
    unchanged.

    ``plan`` finds the current plan from the ``RunContext``; by default the
    latest ``todo/write`` (or ``turn/start``) event of the run's session, found
    as :func:`todo_write_toolset` finds it (``ctx.deps.session`` or ``ctx.deps``).
    """
    if plan is not None and not callable(plan):
        raise UsageError(f"plan must be a function of the RunContext, not {type(plan).__name__}")
    find = _plan_from_deps if plan is None else plan

    async def remind(ctx: RunContext[Any], messages: list[ModelMessage]) -> list[ModelMessage]:
        if not messages or not isinstance(messages[-1], ModelRequest):
            return messages
        found = find(ctx)
        todos = await found if inspect.isawaitable(found) else found
        text = reminder_due(todos, _written(messages), _shown(messages))
        if text is None:
            return messages
        newest = messages[-1]
        return [*messages[:-1], replace(newest, parts=[*newest.parts, UserPromptPart(text)])]

    return remind


def _written(messages: list[ModelMessage]) -> list[object]:
    written: list[object] = []
    for message in messages:
        if not isinstance(message, ModelResponse):
            continue
        for part in message.parts:
            if isinstance(part, ToolCallPart) and part.tool_name == TOOL_NAME:
                try:
                    written.append(part.args_as_dict().get("todos"))
                except (TypeError, ValueError):  # arguments that are not JSON show no plan
                    continue
    return written


def _shown(messages: list[ModelMessage]) -> list[str]:
    return [
        part.content
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, UserPromptPart) and isinstance(part.content, str)
    ]


def _plan_from_deps(ctx: RunContext[Any]) -> Todos | None:
    session = _from_deps(ctx)
    latest = getattr(session, "latest", None)
    if latest is None:
        raise UsageError(
            "plan_reminder_processor finds the plan in the run's session (deps=session, with "
            "latest()); pass plan= a function of the RunContext returning the current plan"
        )
    return plan_in(session)
