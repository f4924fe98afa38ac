"""pydantic-ai: ``todo_write_toolset``, a ``FunctionToolset`` for ``Agent(toolsets=[...])``.

The tool is built with ``Tool.from_schema``: the model is offered this
library's description and parameter schema as they are, and pydantic-ai skips
its own argument validation, so the arguments reach this library's checks as
the model sent them (an unknown argument is refused with the tool's own text,
not dropped). The tool is ``sequential``: the calls of one model turn run one
after the other in the order the model made them, so the last one is the plan.

Who owns the plan: by default the run's dependencies (``deps.session``, or the
deps themselves when they are a session); or pass ``session=`` a function of
the ``RunContext``, e.g. one that looks the session up in an owner registry.

With ``ag_ui=`` an app served by pydantic-ai's AG-UI adapter shows the plan:
each recorded write is answered with a ``ToolReturn`` whose ``return_value``
is the tool's text, exactly what the model reads without the option, and
whose ``metadata`` holds AG-UI events, which the AG-UI adapter puts on its
stream after the tool's result and which no model ever reads
(``docs/wire-formats.md``, "Framework UIs").
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any, Literal

from ..core.contract import TOOL_NAME
from ..core.model import TodoItem
from ..core.tool import TodoWriteTool, todo_write_tool
from ..errors import UsageError
from ..plans import wire
from ..plans.checklist import Todos
from ..protocols import Session
from ..stores.owners import OwnerRegistry
from ._core import (
    FAILED,
    RECORDED,
    NoOwnerWarning,
    Outcome,
    arun_for_owner,
    arun_owned,
    check_owner,
    check_owners,
    refused_no_owner,
)
from ._extras import missing_extra
from ._links import OwnerLinks, delegating
from ._reminder import plan_in, reminder_due

try:
    from pydantic_ai import RunContext, ToolReturn
    from pydantic_ai.exceptions import ModelRetry, ToolFailed
    from pydantic_ai.messages import (
        ModelMessage,
        ModelRequest,
        ModelResponse,
        ToolCallPart,
        UserPromptPart,
    )
    from pydantic_ai.tools import Tool
    from pydantic_ai.toolsets import AbstractToolset, FunctionToolset, WrapperToolset
except ImportError as _error:  # pragma: no cover - exercised with the extra missing
    raise missing_extra(
        "dsh_tool_todo.integrations.pydantic_ai", "pydantic-ai", _error, module="pydantic_ai"
    ) from _error

__all__ = [
    "AgUiEvents",
    "ErrorChannel",
    "OwnerOf",
    "PlanOf",
    "SessionOf",
    "linked_toolset",
    "plan_reminder_processor",
    "todo_write_toolset",
]

ErrorChannel = Literal["failed", "retry", "text"]
"""How a refused call reaches the model (see :func:`todo_write_toolset`)."""

AgUiEvents = Literal["activity", "state", "both"]
"""Which AG-UI events a recorded write adds to the stream (see :func:`todo_write_toolset`)."""

SessionOf = Callable[[RunContext[Any]], Session | Awaitable[Session | None] | None]
"""Finds the session that owns a call from the run's context; ``None``: no owner."""

OwnerOf = Callable[[RunContext[Any]], str | None]
"""Finds the owner key of a call from the run's context; ``None``: no owner."""

PlanOf = Callable[[RunContext[Any]], Todos | Awaitable[Todos | None] | None]
"""Finds the current plan of a run (``None``: no plan), for :func:`plan_reminder_processor`."""

_CHANNELS = ("failed", "retry", "text")
_AG_UI_EVENTS = ("activity", "state", "both")


def todo_write_toolset(
    *,
    allow_parallel_in_progress: bool,
    session: SessionOf | None = None,
    owners: OwnerRegistry | None = None,
    owner: OwnerOf | None = None,
    errors: ErrorChannel = "failed",
    max_retries: int = 1,
    ag_ui: AgUiEvents | None = None,
) -> FunctionToolset[Any]:
    """A toolset holding ``todo_write``, for ``Agent(model, toolsets=[...])``.

    ``allow_parallel_in_progress`` is the composition's choice (no default).
    Who owns the plan, one of:

    - the run's dependencies (the default): ``ctx.deps.session``, or
      ``ctx.deps`` when it is itself a session (has ``append``);
    - ``session``: a function of the ``RunContext`` returning the session
      (or an awaitable of it);
    - ``owners``, an :class:`~dsh_tool_todo.stores.owners.OwnerRegistry`, for
      hosts with no sessions of their own: ``owner(ctx)`` is the owner key
      (default: ``ctx.deps`` when it is a string); the registry opens the
      owner's session on first use and runs one call per owner at a time,
      also across concurrent runs.

    A call with no owner (``None``) gets the tool's "requires an owning agent
    session" text, and the first such call of a toolset logs a WARNING on the
    ``dsh_tool_todo`` logger naming what to pass, so a developer learns why the
    plan stays empty.

    ``errors`` chooses the channel of a refused call:

    - ``"failed"`` (default): ``ToolFailed`` — a failed call: the tool's text
      with the provider's error flag (Anthropic's ``is_error``), or, on a
      provider without one (OpenAI's Chat Completions), the text wrapped as
      ``{"error": "<text>"}``; no retry budget is spent, so a model that keeps
      sending bad lists never ends the run with "exceeded maximum retries";
    - ``"retry"``: ``ModelRetry`` — read as ``"failed"``, but the refusal
      counts against ``max_retries``;
    - ``"text"``: the text as an ordinary result, exactly, on every provider.

    A valid call that could not be recorded (``ToolFailure``) is answered with
    the short not-recorded text through ``ToolFailed`` (as plain text with
    ``"text"``), never as a retry, and its cause is logged (logger
    ``dsh_tool_todo``).

    Each call's ``RunContext.tool_call_id`` is recorded with it (``callId``),
    so a store recognises a call a durable engine retries within the turn.

    ``ag_ui`` (extra ``pydantic-ai-ag-ui``; off by default) shows the plan in an
    AG-UI app served by pydantic-ai's AG-UI adapter (``AGUIAdapter``,
    ``agent.to_ag_ui()``): each recorded write also carries, as the
    ``ToolReturn``'s metadata the model never reads, the plan as

    - ``"activity"``: an ``ACTIVITY_SNAPSHOT`` of ``activityType`` ``PLAN``,
      ``replace: true``, ``messageId`` ``plan:<threadId>`` (the run's
      ``conversation_id``, which the AG-UI adapter sets from the thread), so
      the client keeps one plan per thread, replaced by each write;
    - ``"state"``: a ``STATE_DELTA`` setting the shared state's ``todos`` key,
      leaving the rest of the state alone;
    - ``"both"``: the two, activity first.

    The model reads exactly the text it reads without ``ag_ui``. A refused or
    unrecorded call adds nothing.
    """
    if errors not in _CHANNELS:
        raise UsageError(f"errors must be one of {', '.join(_CHANNELS)}, not {errors!r}")
    if ag_ui is not None and ag_ui not in _AG_UI_EVENTS:
        raise UsageError(
            f"ag_ui must be one of {', '.join(_AG_UI_EVENTS)} (or None, the default), not {ag_ui!r}"
        )
    if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
        raise UsageError(f"max_retries must be an int of at least 0, not {max_retries!r}")
    check_owners("todo_write_toolset", owners)
    if owner is not None:
        check_owner("todo_write_toolset", owner, function_of="RunContext", key_ok=False)
    if owners is not None and session is not None:
        raise UsageError("pass either session= or owners=, not both")
    if owner is not None and owners is None:
        raise UsageError("owner= names a key in an owner registry: pass owners= too")
    tool = todo_write_tool(allow_parallel_in_progress=allow_parallel_in_progress)
    if owners is not None:
        call: _Call = _RegistryCall(
            tool, errors, owners, _key_from_deps if owner is None else owner
        )
    else:
        call = _SessionCall(tool, errors, _from_deps if session is None else session)
    if ag_ui is not None:
        call.ui_events = _ag_ui_events(ag_ui)
    function_tool: Tool[Any] = Tool.from_schema(
        call,
        name=TOOL_NAME,
        description=tool.description,
        json_schema=dict(tool.parameters),
        takes_ctx=True,
        sequential=True,
    )
    return FunctionToolset([function_tool], max_retries=max_retries)


class _Call:
    """The tool's function: find the call's owner, run the core, map the outcome to a channel."""

    remedy = (
        "pass the run's session log as deps (agent.run(..., deps=session)), "
        "or build the toolset with session= or owners="
    )

    def __init__(self, tool: TodoWriteTool, errors: ErrorChannel) -> None:
        self.tool = tool
        self.errors = errors
        self.no_owner = NoOwnerWarning(self.remedy)
        self.ui_events: _UiEvents | None = None

    async def __call__(self, ctx: RunContext[Any], **args: Any) -> str | ToolReturn:
        outcome = await self.outcome(ctx, args)
        if outcome.kind == RECORDED:
            if self.ui_events is None or outcome.todos is None:
                return outcome.text
            # return_value is what the model reads: the same text; metadata never reaches it
            events = self.ui_events(ctx, outcome.todos)
            return ToolReturn(return_value=outcome.text, metadata=events)
        if outcome.kind == FAILED:  # never a retry: the model's call was valid
            if self.errors == "text":
                return outcome.text
            raise ToolFailed(outcome.text)
        # refused: nothing was recorded; the text says why
        if self.errors == "failed":
            raise ToolFailed(outcome.text)
        if self.errors == "retry":
            raise ModelRetry(outcome.text)
        return outcome.text

    async def outcome(self, ctx: RunContext[Any], args: dict[str, Any]) -> Outcome:
        raise NotImplementedError


class _SessionCall(_Call):
    def __init__(self, tool: TodoWriteTool, errors: ErrorChannel, find: SessionOf) -> None:
        super().__init__(tool, errors)
        self.find = find

    async def outcome(self, ctx: RunContext[Any], args: dict[str, Any]) -> Outcome:
        found = self.find(ctx)
        session = await found if inspect.isawaitable(found) else found
        if session is None:
            return refused_no_owner(self.no_owner)
        return await arun_owned(self.tool, args, session, call_id=ctx.tool_call_id or None)


class _RegistryCall(_Call):
    def __init__(
        self, tool: TodoWriteTool, errors: ErrorChannel, owners: OwnerRegistry, key: OwnerOf
    ) -> None:
        super().__init__(tool, errors)
        self.owners = owners
        self.links = OwnerLinks(owners)
        self.key = key
        if key is not _key_from_deps:
            self.no_owner.remedy = "owner= returned None: return the run's owner key from it"
        else:
            self.no_owner.remedy = (
                "pass the owner key as deps (agent.run(..., deps=user_id)), or pass owner="
            )

    async def outcome(self, ctx: RunContext[Any], args: dict[str, Any]) -> Outcome:
        key = self.key(ctx)
        if key is None:
            return refused_no_owner(self.no_owner)
        key = await self.links.owner_of(key, _agent_name(ctx))  # a sub-agent's own session
        return await arun_for_owner(
            self.tool, args, self.owners, key, call_id=ctx.tool_call_id or None
        )


def linked_toolset(toolset: AbstractToolset[Any]) -> WrapperToolset[Any]:
    """``toolset`` (the tools that run other agents) with each sub-agent's plans linked.

    While a call of one of its tools runs, every ``todo_write`` call of an agent
    it runs (through a toolset of this adapter built with ``owners=``) is
    recorded in a session of its own, keyed ``<owner>/<agent name>`` in the same
    registry, and linked to the calling agent's session with the call's id
    (:mod:`dsh_tool_todo.core.links`); ``dsh-todo sessions`` shows the tree. Without
    it, a sub-agent run with the same deps would write into its parent's plan::

        async def research(ctx: RunContext[str], question: str) -> str:
            result = await researcher.run(question, deps=ctx.deps, usage=ctx.usage)
            return result.output

        lead = Agent(model, name="lead", deps_type=str, toolsets=[
            todo, linked_toolset(FunctionToolset([research]))])

    The tools are offered unchanged: the model sees nothing new.
    """
    if not isinstance(toolset, AbstractToolset):
        raise UsageError(
            f"linked_toolset takes a pydantic-ai toolset (e.g. FunctionToolset([tool])), "
            f"not {type(toolset).__name__}"
        )
    return _LinkedToolset(toolset)


@dataclass
class _LinkedToolset(WrapperToolset[Any]):
    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: Any
    ) -> Any:
        with delegating(_agent_name(ctx), ctx.tool_call_id):
            return await super().call_tool(name, tool_args, ctx, tool)


def _agent_name(ctx: RunContext[Any]) -> str | None:
    name = getattr(ctx.agent, "name", None)
    return name if isinstance(name, str) and name else None


_UiEvents = Callable[[RunContext[Any], list[TodoItem]], list[Any]]


def _ag_ui_events(which: AgUiEvents) -> _UiEvents:
    """The AG-UI events of one recorded write, as ``ag-ui-protocol``'s models.

    The AG-UI adapter passes on only ``BaseEvent`` instances from a tool's
    metadata, so the dicts of :mod:`dsh_tool_todo.plans.wire` are validated into them.
    """
    try:
        from ag_ui.core import ActivitySnapshotEvent, StateDeltaEvent
    except ImportError as error:
        raise missing_extra(
            "todo_write_toolset(ag_ui=...)", "pydantic-ai-ag-ui", error, module="ag_ui"
        ) from error
    activity = which in ("activity", "both")
    state = which in ("state", "both")

    def events(ctx: RunContext[Any], todos: list[TodoItem]) -> list[Any]:
        shown = _encodable(todos)
        made: list[Any] = []
        if activity:
            key = _thread_of(ctx)
            made.append(
                ActivitySnapshotEvent.model_validate(wire.ag_ui_activity_snapshot(key, shown))
            )
        if state:
            made.append(StateDeltaEvent.model_validate(wire.ag_ui_state_delta(shown)))
        return made

    return events


def _encodable(todos: list[TodoItem]) -> list[dict[str, str]]:
    """The plan with each lone surrogate shown as U+FFFD, for the UI only.

    The tool records a lone surrogate as the model sent it (the log keeps it),
    but the AG-UI encoder, pydantic's JSON, refuses such text: left in, one
    odd character would end the whole run's stream with an error.
    """
    shown: list[dict[str, str]] = []
    for item in todos:
        content = item["content"]
        try:
            content.encode("utf-8")
        except UnicodeEncodeError:
            content = content.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
        shown.append({"content": content, "status": item["status"]})
    return shown


def _thread_of(ctx: RunContext[Any]) -> str:
    # The AG-UI adapter runs the agent with the request's threadId as conversation_id;
    # before pydantic-ai had one, the run id is the best stable key there is.
    for name in ("conversation_id", "run_id"):
        value = getattr(ctx, name, None)
        if isinstance(value, str) and value:
            return value
    return "run"


def _key_from_deps(ctx: RunContext[Any]) -> str | None:
    return ctx.deps if isinstance(ctx.deps, str) else None


def _from_deps(ctx: RunContext[Any]) -> Session | None:
    deps = ctx.deps
    owner = getattr(deps, "session", None)
    if owner is not None:
        return owner  # type: ignore[no-any-return]
    if hasattr(deps, "append"):
        return deps  # type: ignore[no-any-return]
    return None


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
