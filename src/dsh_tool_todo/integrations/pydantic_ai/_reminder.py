"""pydantic-ai's history processor: the plan re-surfaced after a compaction, and what a
person asked of it told to the model."""

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
from pydantic_ai.toolsets import FunctionToolset

from ...core.contract import TOOL_NAME
from ...errors import UsageError
from ...plans.checklist import Todos
from .._binding import OwnerRegistry
from .._links import nested_owner
from .._notice import atold, atold_in
from .._reminder import aplan_in, aplan_of, plan_in, reminder_due
from ._call import _agent_name, _Call, _from_deps, _HomeCall, _RegistryCall, _SessionCall, _Toolset

if TYPE_CHECKING:
    from . import PlanOf

_HistoryProcessor = Callable[[RunContext[Any], list[ModelMessage]], Awaitable[list[ModelMessage]]]


def plan_reminder_processor(
    *, plan: PlanOf | None = None, toolset: FunctionToolset[Any] | None = None
) -> _HistoryProcessor:
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

    ``toolset``: the :func:`todo_write_toolset` the agent runs. The processor then reads
    the plan where the tool records this run's calls (the run's owner in the toolset's
    registry, or the run's session as the toolset finds it; unless ``plan`` is given), and
    tells the model what a person asked of it since the last request (``docs/requests.md``):
    the request notice, a user prompt part of its own after the reminder's place, once.
    """
    if plan is not None and not callable(plan):
        raise UsageError(f"plan must be a function of the RunContext, not {type(plan).__name__}")
    owned = _toolset_call(toolset)

    async def remind(ctx: RunContext[Any], messages: list[ModelMessage]) -> list[ModelMessage]:
        if not messages or not isinstance(messages[-1], ModelRequest):
            return messages
        owner = _owner(owned, ctx) if isinstance(owned, _RegistryCall) else None
        session = None if owned is None or owner is not None else await _session(owned, ctx)
        if plan is not None:
            found = plan(ctx)
            todos = await found if inspect.isawaitable(found) else found
        elif owner is not None:
            todos = await aplan_of(*owner)
        elif session is not None:
            todos = await aplan_in(session)
        elif owned is None or _from_deps(ctx) is not None:
            todos = _plan_from_deps(ctx)
        else:
            todos = None  # a run the toolset finds no owner for has no plan
        added = [reminder_due(todos, _written(messages), _shown(messages))]
        # each its own part: never joined to the reminder
        if owner is not None:
            added.append(await atold(*owner))
        elif session is not None:
            added.append(await atold_in(session))
        parts = [UserPromptPart(text) for text in added if text is not None]
        if not parts:
            return messages
        newest = messages[-1]
        return [*messages[:-1], replace(newest, parts=[*newest.parts, *parts])]

    return remind


def _toolset_call(toolset: object) -> _Call | None:
    """The tool function of ``toolset``: where it finds the owner of a run's calls."""
    if toolset is None:
        return None
    if not isinstance(toolset, _Toolset):
        raise UsageError(
            "plan_reminder_processor: toolset= takes the toolset todo_write_toolset() returned, "
            f"not {type(toolset).__name__}"
        )
    return toolset.call


async def _session(call: _Call, ctx: RunContext[Any]) -> Any:
    """The session the tool records this run's calls in when it is the run's own (``deps``,
    or ``session=``), not a registry's (``None``)."""
    if isinstance(call, _SessionCall):
        found = call.find(ctx)
        return await found if inspect.isawaitable(found) else found
    return _from_deps(ctx) if isinstance(call, _HomeCall) else None


def _owner(call: _RegistryCall, ctx: RunContext[Any]) -> tuple[OwnerRegistry, str] | None:
    """The registry and owner key the tool records this run's calls under (``None``: none)."""
    if isinstance(call, _HomeCall) and _from_deps(ctx) is not None:
        return None  # a session of the run's own: its plan is read from it
    key = call.binding.key(ctx)
    if not isinstance(key, str):
        return None
    # a sub-agent run under linked_toolset writes its own plan: read that one
    return call.binding.owners, nested_owner(key, _agent_name(ctx))[0]


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
