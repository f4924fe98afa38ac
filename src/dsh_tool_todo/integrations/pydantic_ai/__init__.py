"""pydantic-ai: ``todo_write_toolset``, a ``FunctionToolset`` for ``Agent(toolsets=[...])``.

The tool is built with ``Tool.from_schema``: the model is offered this
library's description and parameter schema as they are, and pydantic-ai skips
its own argument validation, so the arguments reach this library's checks as
the model sent them (an unknown argument is refused with the tool's own text,
not dropped). The tool is ``sequential``: the calls of one model turn run one
after the other in the order the model made them, so the last one is the plan.

Who owns the plan: by default the run's dependencies (``deps.session``, or the
deps themselves when they are a session); or pass ``session=`` a function of
the ``RunContext``, or ``owners=`` the place plans are kept (a directory, a
``postgresql://`` URL, an owner registry). With neither, ``DSH_TODO_HOME``
(read when the toolset is built) names the place of the runs that bring no
session.

With ``ag_ui=`` an app served by pydantic-ai's AG-UI adapter shows the plan:
each recorded write is answered with a ``ToolReturn`` whose ``return_value``
is the tool's text, exactly what the model reads without the option, and
whose ``metadata`` holds AG-UI events, which the AG-UI adapter puts on its
stream after the tool's result and which no model ever reads
(``docs/wire-formats.md``, "Framework UIs").
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

from ...core.contract import TOOL_NAME
from ...errors import UsageError
from ...plans.checklist import Todos
from .._binding import Binding, OwnerRegistry, Session
from .._extras import needs_extra
from .._links import delegating

with needs_extra("dsh_tool_todo.integrations.pydantic_ai", "pydantic-ai", module="pydantic_ai"):
    from pydantic_ai import RunContext
    from pydantic_ai.tools import Tool
    from pydantic_ai.toolsets import AbstractToolset, FunctionToolset, WrapperToolset

from ._call import (
    _ag_ui_events,
    _agent_name,
    _Call,
    _from_deps,
    _home_key,
    _HomeCall,
    _key_from_deps,
    _RegistryCall,
    _SessionCall,
    _Toolset,
)
from ._reminder import plan_reminder_processor

__all__ = [
    "AgUiEvents",
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

_NAME = "todo_write_toolset"
_CHANNELS = ("failed", "retry", "text")
_AG_UI_EVENTS = ("activity", "state", "both")


def todo_write_toolset(
    *,
    allow_parallel_in_progress: bool,
    session: SessionOf | None = None,
    owners: OwnerRegistry | str | os.PathLike[str] | None = None,
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
    - ``owners``, where the plans are kept, for hosts with no sessions of their
      own: a directory, a ``postgresql://`` URL or an
      :class:`~dsh_tool_todo.stores.owners.OwnerRegistry`. ``owner(ctx)`` is the
      owner key (default: ``ctx.deps`` when it is a string); the owner's session
      is opened on first use, and one call per owner runs at a time, also across
      concurrent runs.

    With neither ``session`` nor ``owners``, when ``DSH_TODO_HOME`` names a place
    (read here, when the toolset is built), a run whose deps are not a session
    records there, under the key ``ctx.deps`` when it is a string, else
    ``"default"``. The sessions of a place the toolset opened itself (a directory,
    a URL, the variable's) are closed whenever no run is using the toolset.

    A call with no owner (``None``) gets the tool's "requires an owning agent
    session" text; the first such call of a toolset logs a WARNING (logger
    ``dsh_tool_todo``) naming what to pass.

    ``errors`` chooses the channel of a refused call:

    - ``"failed"`` (default): ``ToolFailed``, a failed call: the tool's text with
      the provider's error flag (Anthropic's ``is_error``), or, on a provider
      without one (OpenAI's Chat Completions), ``{"error": "<text>"}``; no retry
      budget is spent, so a model that keeps sending bad lists never ends the
      run with "exceeded maximum retries";
    - ``"retry"``: ``ModelRetry``, read as ``"failed"``, but each refusal
      counts against ``max_retries``;
    - ``"text"``: the text as an ordinary result, exactly, on every provider.

    A valid call that could not be recorded (``ToolFailure``) is answered with
    the not-recorded text through ``ToolFailed`` (plain text with ``"text"``),
    never as a retry, its cause logged. Each call's ``RunContext.tool_call_id``
    is recorded with it (``callId``): a store recognises a durable engine's retry.

    ``ag_ui`` (extra ``pydantic-ai-ag-ui``; off by default) shows the plan in an
    app served by pydantic-ai's AG-UI adapter (``AGUIAdapter``): each recorded
    write also carries, as ``ToolReturn`` metadata the model never reads,
    ``"activity"``: an ``ACTIVITY_SNAPSHOT`` of ``activityType`` ``PLAN``,
    ``replace: true``, ``messageId`` ``plan:<threadId>`` (the run's
    ``conversation_id``); ``"state"``: a ``STATE_DELTA`` setting the shared
    state's ``todos`` key alone; ``"both"``: the two, activity first. The model
    reads exactly the text it reads without ``ag_ui``; a refused or unrecorded
    call adds nothing.
    """
    if ag_ui is not None and ag_ui not in _AG_UI_EVENTS:
        raise UsageError(
            f"ag_ui must be one of {', '.join(_AG_UI_EVENTS)} (or None, the default), not {ag_ui!r}"
        )
    call, opened = _bound(allow_parallel_in_progress, session, owners, owner, errors, max_retries)
    if ag_ui is not None:
        call.ui_events = _ag_ui_events(ag_ui)
    function_tool: Tool[Any] = Tool.from_schema(
        call,
        name=TOOL_NAME,
        description=call.binding.tool.description,
        json_schema=dict(call.binding.tool.parameters),
        takes_ctx=True,
        sequential=True,
    )
    return _Toolset([function_tool], max_retries=max_retries, opened=opened, call=call)


def _bound(
    parallel: bool,
    session: SessionOf | None,
    owners: object,
    owner: OwnerOf | None,
    errors: ErrorChannel,
    max_retries: object,
) -> tuple[_Call, OwnerRegistry | None]:
    """The toolset's arguments checked, and the tool's function bound to its owners; the
    registry the toolset opened itself (``None``: it holds none, or the caller's)."""
    if errors not in _CHANNELS:
        raise UsageError(f"errors must be one of {', '.join(_CHANNELS)}, not {errors!r}")
    if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
        raise UsageError(f"max_retries must be an int of at least 0, not {max_retries!r}")
    if owner is not None:
        Binding.check_owner(_NAME, owner, function_of="RunContext", key_ok=False)
    if owners is not None and session is not None:
        raise UsageError("pass either session= or owners=, not both")
    if owner is not None and owners is None:
        raise UsageError("owner= names a key in an owner registry: pass owners= too")
    home = Binding.home() if owners is None and session is None else None
    place = owners if owners is not None else home
    registry = Binding.registry(_NAME, OwnerRegistry() if place is None else place)
    opened = None if isinstance(owners, OwnerRegistry) or place is None else registry
    if owners is not None:
        remedy = (
            "owner= returned None: return the run's owner key from it"
            if owner is not None
            else "pass the owner key as deps (agent.run(..., deps=user_id)), or pass owner="
        )
    else:
        remedy = (
            "pass the run's session log as deps (agent.run(..., deps=session)), "
            "or build the toolset with session= or owners= (or with DSH_TODO_HOME set)"
        )
    key_of = owner if owner is not None else _key_from_deps if home is None else _home_key
    binding = Binding(
        _NAME,
        allow_parallel_in_progress=parallel,
        owner=key_of,
        owners=registry,
        function_of="RunContext",
        key_ok=False,
        remedy=remedy,
    )
    if owners is not None:
        return _RegistryCall(binding, errors), opened
    if home is not None:
        return _HomeCall(binding, errors), opened
    return _SessionCall(binding, errors, _from_deps if session is None else session), None


def linked_toolset(toolset: AbstractToolset[Any]) -> WrapperToolset[Any]:
    """``toolset`` (the tools that run other agents) with each sub-agent's plans linked.

    While a call of one of its tools runs, every ``todo_write`` call of an agent
    it runs (through a toolset of this adapter built with ``owners=``) is
    recorded in a session of its own, keyed ``<owner>/<agent name>@<call id>`` in the same
    registry, and linked to the calling agent's session with the call's id
    (:mod:`dsh_tool_todo.core.links`); ``dsh-todo sessions`` shows the tree. When the
    call returns, each such session gets ``session/end`` ``finished``; when it raises,
    ``failed`` with the error's text (the error goes on unchanged). Without it, a
    sub-agent run with the same deps would write into its parent's plan::

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
        async with delegating(_agent_name(ctx), ctx.tool_call_id):
            return await super().call_tool(name, tool_args, ctx, tool)
