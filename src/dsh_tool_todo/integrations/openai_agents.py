"""``todo_write`` for the OpenAI Agents SDK: a ``FunctionTool`` with our strict schema and texts.

Use it as any other tool of an ``Agent``::

    from agents import Agent
    tool = todo_write_function_tool(
        allow_parallel_in_progress=False, owner=lambda ctx: ctx.context.user_id
    )
    agent = Agent(name="planner", tools=[tool])

What the model gets (extra ``openai-agents``):

- the tool's parameters are exactly ours, already in the strict form the SDK
  enforces (``ensure_strict_json_schema`` leaves them unchanged), so the
  definition the model reads is what ``dsh-todo schema --format openai`` prints;
- the raw JSON arguments go straight to this library's validation (no SDK
  parsing in between), and the text the model reads is returned as-is: a
  refusal is the refusal's text (the SDK's default error handler, which would
  hide it, never runs), a failure to record is
  :data:`~dsh_tool_todo.core.contract.NOT_RECORDED` with the cause logged on the
  ``dsh_tool_todo`` logger.

The SDK runs the tool calls of one model response concurrently; calls for one
owner are serialised here, in call order, so two ``todo_write`` calls in one
response end on the later list. Each call's ``ToolContext.tool_call_id`` is
recorded with it (``callId``), so a store recognises a retried call within the
turn. :func:`plan_reminder_filter` (opt-in, a ``RunConfig.call_model_input_filter``)
re-surfaces the plan when a compaction left the model without it, and tells the model
what a person asked of the plan (``docs/requests.md``). See
``docs/integrations/openai-agents.md``.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Awaitable, Callable
from typing import Any

from ..core.contract import TOOL_NAME
from ..errors import ToolFailure, UsageError
from ._binding import Binding, OwnerRegistry
from ._extras import needs_extra
from ._links import delegating, nested_owner
from ._notice import atold
from ._reminder import aplan_of, reminder_due, todos_of

with needs_extra("dsh_tool_todo.integrations.openai_agents", "openai-agents", module="agents"):
    # Submodules by name (never a bare `import agents`: too generic a name, a
    # user's own agents.py would pass for the SDK and fail later, deep inside).
    from agents import tool as _sdk_tool
    from agents.items import TResponseInputItem
    from agents.run_config import CallModelData, CallModelInputFilter, ModelInputData
    from agents.tool import FunctionTool
    from agents.tool_context import ToolContext

__all__ = [
    "OwnerOf",
    "linked_agent_tool",
    "plan_reminder_filter",
    "todo_write_function_tool",
]

OwnerOf = Callable[[ToolContext[Any]], str | None]
"""Picks a call's owner key from its tool context (``ctx.context`` is the run's context);
``None``: the call has no owner."""

RunOwnerOf = Callable[[Any], str | None]
"""Picks the owner key from the run's context (what ``Runner.run(context=...)`` took)."""


def todo_write_function_tool(
    *, allow_parallel_in_progress: bool, owner: str | OwnerOf, owners: OwnerRegistry | None = None
) -> FunctionTool:
    """The ``todo_write`` ``FunctionTool``; each call's plan belongs to ``owner``.

    ``owner`` is a fixed owner key, or a function of the call's
    ``ToolContext`` returning one (e.g. ``lambda ctx: ctx.context.user_id``:
    one plan per user of the run context). ``owners`` holds the sessions
    (default: an in-memory registry of this tool's own, which nothing outside
    the tool can read; pass your own to read plans back, or
    ``OwnerRegistry(directory)`` for durable plans).

    A call whose ``owner`` function returns ``None`` gets the tool's "requires
    an owning agent session" text, and the first such call logs a WARNING on
    the ``dsh_tool_todo`` logger.
    """
    binding = Binding(
        "todo_write_function_tool",
        allow_parallel_in_progress=allow_parallel_in_progress,
        owner=owner,
        owners=owners,
        function_of="ToolContext",
        remedy="owner= returned None: return the run's owner key from it",
    )
    tool = binding.tool

    async def invoke(ctx: ToolContext[Any], arguments: str) -> str:
        key = binding.key(ctx)
        if key is None:
            return binding.refused().text
        try:
            key = await binding.alinked(key, _agent_name(ctx))  # a sub-agent's own, linked session
        except ToolFailure as failure:  # a session it opened to link could not be opened
            return binding.not_recorded(failure, key).text
        # The model reads refusals as plain results here: the text path is enough.
        return await binding.atext(arguments, key, call_id=ctx.tool_call_id or None)

    return FunctionTool(
        name=tool.name,
        description=tool.description,
        params_json_schema=dict(tool.parameters),
        on_invoke_tool=invoke,
        strict_json_schema=True,
    )


def linked_agent_tool(agent_tool: FunctionTool) -> FunctionTool:
    """``agent_tool`` (what ``agent.as_tool(...)`` makes) with its sub-agent's plans linked.

    While the parent agent's call of the returned tool runs, every ``todo_write``
    call of the sub-agent (made with this adapter's tool) is recorded in a session
    of its own, keyed ``<owner>/<sub-agent name>`` in the same registry, and that
    session is linked to the parent's with the parent's tool-call id
    (:mod:`dsh_tool_todo.core.links`); ``dsh-todo sessions`` then shows the tree. Without
    it, the sub-agent would write into its parent's plan. Nesting goes any depth::

        researcher = Agent(name="researcher", tools=[todo])
        lead = Agent(name="lead", tools=[todo, linked_agent_tool(researcher.as_tool(
            tool_name="research", tool_description="Research a question"))])

    When the call returns, each sub-agent session opened during it gets
    ``session/end`` ``finished``; when the sub-agent's run fails, ``failed`` with
    the error's text. A failure the SDK answers the model with (``as_tool``'s
    ``failure_error_function``, its default included) is seen here first, then
    answered exactly as the SDK would, by the same function for the same tool.

    The tool itself is unchanged (name, description, schema): only its invocation
    is wrapped, and the model sees nothing new.
    """
    if not isinstance(agent_tool, FunctionTool):
        raise UsageError(
            f"linked_agent_tool takes the FunctionTool agent.as_tool() returns, not "
            f"{type(agent_tool).__name__}"
        )
    invoke_agent, answer_failure = _raising(agent_tool)

    async def invoke(ctx: ToolContext[Any], arguments: str) -> Any:
        try:
            async with delegating(_agent_name(ctx), getattr(ctx, "tool_call_id", None)):
                return await invoke_agent(ctx, arguments)
        except Exception as error:
            if answer_failure is None:
                raise
            answer = await answer_failure(ctx, arguments, error)
            if answer is None:  # the tool's policy is to raise
                raise
            return answer

    return dataclasses.replace(agent_tool, on_invoke_tool=invoke)


def _raising(
    agent_tool: FunctionTool,
) -> tuple[Callable[..., Any], Callable[..., Awaitable[Any]] | None]:
    """``agent_tool``'s invocation with its failures raised (the sub-agent's end is written
    ``failed`` before any answer to the model), and the answer to a failure as the SDK gives
    it: the tool's failure function's text (``None``: raise), logged and traced as the SDK
    does. An SDK without these pieces: the invocation as it is (a failure it answers itself
    is then ended ``finished``), and no answer."""
    answer_by_policy = getattr(_sdk_tool, "maybe_invoke_function_tool_failure_error_function", None)
    set_policy = getattr(_sdk_tool, "set_function_tool_failure_error_function", None)
    invoker = agent_tool.on_invoke_tool
    bind = getattr(invoker, "__agents_bind_function_tool__", None)
    if answer_by_policy is None or set_policy is None or not callable(bind):
        return invoker, None
    report = getattr(invoker, "_on_handled_error", None)  # the SDK's log and span of it

    async def answer(ctx: ToolContext[Any], arguments: str, error: Exception) -> Any:
        text = await answer_by_policy(function_tool=agent_tool, context=ctx, error=error)
        if text is not None and callable(report):
            report(agent_tool, error, arguments, ctx)
        return text

    # an invoker answers a failure by the policy of the tool it is bound to: bind it to a
    # copy whose policy is to raise (None), and answer by the user's tool's policy here
    shadow = dataclasses.replace(agent_tool)
    set_policy(shadow, None)
    return bind(shadow), answer


def _agent_name(ctx: ToolContext[Any]) -> str | None:
    return _named(getattr(ctx, "agent", None))


def _named(agent: object) -> str | None:
    name = getattr(agent, "name", None)
    return name if isinstance(name, str) and name else None


def plan_reminder_filter(
    *,
    owner: str | RunOwnerOf,
    owners: OwnerRegistry,
    compact: CallModelInputFilter | None = None,
) -> CallModelInputFilter:
    """A ``RunConfig.call_model_input_filter`` re-surfacing the plan after a compaction (opt-in).

    ``compact`` is your own filter, if any (the one that summarises or trims); it
    runs first. Then, when ``owner``'s current plan in ``owners`` is not empty and
    no ``todo_write`` call (nor an earlier reminder) left in the input shows it,
    :func:`~dsh_tool_todo.plans.reminder.plan_reminder` is added as a user message after
    the newest item. Nothing before it changes. The SDK keeps no filtered input in
    its history, so the reminder is added to each request until a write shows the
    plan again, always last: its tokens are paid per request, the prefix before it
    stays cacheable.

    ``owner`` is the owner key the tool uses, or a function of the run's context
    returning it (``lambda context: context["user"]``); ``None``: no reminder.

    It also tells the model what a person asked of the plan since the last request
    (``docs/requests.md``): the request notice, a user message of its own after the
    newest item (and after the reminder), in that one request only; the model's answer
    is in the history from then on.
    """
    binding = Binding(
        "plan_reminder_filter",
        allow_parallel_in_progress=False,
        owner=owner,
        owners=owners,
        function_of="run context",
    )
    if owners is None:
        raise UsageError(
            "plan_reminder_filter: owners= takes the OwnerRegistry given to "
            "todo_write_function_tool(owners=...), where the plans are"
        )
    if compact is not None and not callable(compact):
        raise UsageError(f"compact must be a call_model_input_filter, not {compact!r}")

    async def remind(data: CallModelData[Any]) -> ModelInputData:
        if compact is not None:
            filtered = compact(data)
            data = dataclasses.replace(
                data, model_data=await filtered if inspect.isawaitable(filtered) else filtered
            )
        items = data.model_data.input
        key = binding.key(data.context)
        if key is None:
            return data.model_data
        # a sub-agent run under linked_agent_tool writes its own plan: read that one
        key, _ = nested_owner(key, _named(data.agent))
        text = reminder_due(await aplan_of(binding.owners, key), _written(items), _shown(items))
        notice = await atold(binding.owners, key)
        # each its own message: the reminder is found again by its exact text
        added: list[TResponseInputItem] = [
            {"role": "user", "content": shown} for shown in (text, notice) if shown is not None
        ]
        if not added:
            return data.model_data
        return dataclasses.replace(data.model_data, input=[*items, *added])

    return remind


def _written(items: list[TResponseInputItem]) -> list[object]:
    return [
        todos_of(item.get("arguments"))
        for item in items
        if isinstance(item, dict)
        and item.get("type") == "function_call"
        and item.get("name") == TOOL_NAME
    ]


def _shown(items: list[TResponseInputItem]) -> list[str]:
    shown: list[str] = []
    for item in items:
        if not isinstance(item, dict) or item.get("role") != "user":
            continue
        content = item.get("content")
        if isinstance(content, str):
            shown.append(content)
        elif isinstance(content, list):
            shown += [
                part["text"]
                for part in content
                if isinstance(part, dict) and part.get("type") == "input_text"
            ]
    return shown
