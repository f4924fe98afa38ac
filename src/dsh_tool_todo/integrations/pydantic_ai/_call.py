"""The pydantic-ai toolset's pieces: the tool's function on the binding, the toolset that
closes what it opened, and the tool's AG-UI events."""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pydantic_ai import RunContext, ToolReturn
from pydantic_ai.exceptions import ModelRetry, ToolFailed
from pydantic_ai.tools import Tool
from pydantic_ai.toolsets import FunctionToolset

from ...errors import ToolFailure
from ...plans import wire
from .._binding import Binding, Outcome, OwnerRegistry, Session, TodoItem
from .._extras import needs_extra

if TYPE_CHECKING:
    from typing_extensions import Self

    from . import AgUiEvents, ErrorChannel, SessionOf


class _Call:
    """The tool's function: find the call's owner, run the binding, map the outcome to a channel."""

    def __init__(self, binding: Binding, errors: ErrorChannel) -> None:
        self.binding = binding
        self.errors = errors
        self.ui_events: _UiEvents | None = None

    async def __call__(self, ctx: RunContext[Any], **args: Any) -> str | ToolReturn:
        outcome = await self.outcome(ctx, args)
        if outcome.kind == Outcome.RECORDED:
            if self.ui_events is None or outcome.todos is None:
                return outcome.text
            # return_value is what the model reads: the same text; metadata never reaches it
            events = self.ui_events(ctx, outcome.todos)
            return ToolReturn(return_value=outcome.text, metadata=events)
        if outcome.kind == Outcome.FAILED:  # never a retry: the model's call was valid
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
    def __init__(self, binding: Binding, errors: ErrorChannel, find: SessionOf) -> None:
        super().__init__(binding, errors)
        self.find = find

    async def outcome(self, ctx: RunContext[Any], args: dict[str, Any]) -> Outcome:
        found = self.find(ctx)
        session = await found if inspect.isawaitable(found) else found
        if session is None:
            return self.binding.refused()
        return await self.binding.acall_in(args, session, call_id=ctx.tool_call_id or None)


class _RegistryCall(_Call):
    async def outcome(self, ctx: RunContext[Any], args: dict[str, Any]) -> Outcome:
        key = self.binding.key(ctx)
        if key is None:
            return self.binding.refused()
        try:
            key = await self.binding.alinked(key, _agent_name(ctx))  # a sub-agent's own session
        except ToolFailure as failure:  # a session it opened to link could not be opened
            return self.binding.not_recorded(failure, key)
        return await self.binding.acall(args, key, call_id=ctx.tool_call_id or None)


class _HomeCall(_RegistryCall):
    """The place DSH_TODO_HOME names, for runs that bring no session: a deps that is one
    was put there by the developer, so it still owns the plan."""

    async def outcome(self, ctx: RunContext[Any], args: dict[str, Any]) -> Outcome:
        session = _from_deps(ctx)
        if session is not None:
            return await self.binding.acall_in(args, session, call_id=ctx.tool_call_id or None)
        return await super().outcome(ctx, args)


class _Toolset(FunctionToolset[Any]):
    """The toolset, closing the sessions of a registry it opened itself (from a directory,
    a URL or DSH_TODO_HOME) whenever no run is using it: a log's one-writer lock is then
    free for another process, and nothing is left open for the interpreter to warn about.
    The registry reopens a session, plan intact, at its owner's next call."""

    def __init__(
        self,
        tools: list[Tool[Any]],
        *,
        max_retries: int,
        opened: OwnerRegistry | None,
        call: _Call,
    ) -> None:
        super().__init__(tools, max_retries=max_retries)
        self.call = call  # what plan_reminder_processor(toolset=...) finds the owner with
        self._opened = opened
        self._runs = 0
        self._runs_lock = threading.Lock()  # runs of one toolset may be on several loops

    async def __aenter__(self) -> Self:
        with self._runs_lock:
            self._runs += 1
        await super().__aenter__()
        return self

    async def __aexit__(self, *args: Any) -> bool | None:
        with self._runs_lock:
            self._runs -= 1
            last = self._runs == 0
        if last and self._opened is not None:
            for owner in self._opened.owners():
                self._opened.close(owner)  # idle ones only: a call in progress keeps its own
        return await super().__aexit__(*args)


def _agent_name(ctx: RunContext[Any]) -> str | None:
    name = getattr(ctx.agent, "name", None)
    return name if isinstance(name, str) and name else None


_UiEvents = Callable[[RunContext[Any], list[TodoItem]], list[Any]]


def _ag_ui_events(which: AgUiEvents) -> _UiEvents:
    """The AG-UI events of one recorded write, as ``ag-ui-protocol``'s models.

    The AG-UI adapter passes on only ``BaseEvent`` instances from a tool's
    metadata, so the dicts of :mod:`dsh_tool_todo.plans.wire` are validated into them.
    """
    with needs_extra("todo_write_toolset(ag_ui=...)", "pydantic-ai-ag-ui", module="ag_ui"):
        from ag_ui.core import ActivitySnapshotEvent, StateDeltaEvent
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


def _home_key(ctx: RunContext[Any]) -> str:
    """The owner key of a run recording where DSH_TODO_HOME names: its deps when they are a
    key, else the one key every such run shares."""
    return ctx.deps if isinstance(ctx.deps, str) and ctx.deps else "default"


def _from_deps(ctx: RunContext[Any]) -> Session | None:
    deps = ctx.deps
    owner = getattr(deps, "session", None)
    if owner is not None:
        return owner  # type: ignore[no-any-return]
    if hasattr(deps, "append"):
        return deps  # type: ignore[no-any-return]
    return None
