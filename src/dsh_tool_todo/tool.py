"""The ``todo_write`` tool: one pure core, a sync and an async shell around the session write."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Mapping
from typing import Any, TypeGuard

from .contract import (
    DESCRIPTION_PARALLEL,
    DESCRIPTION_SINGLE,
    EVENT_TYPE,
    NO_OWNER,
    SUCCESS_TEXT,
    TOOL_NAME,
)
from .errors import ToolCallRejected, ToolFailure, UsageError
from .model import TodoResult
from .options import TodoOptions
from .protocols import PluginContext, Session, ToolExec
from .schema import parameters
from .validation import validate_call


class TodoWriteTool:
    """The model-facing tool. ``execute`` for plain sessions, ``aexecute`` for async ones.

    Both return the canonical result, raise :class:`ToolCallRejected` for a bad
    call (nothing is appended) and :class:`ToolFailure` when the session's
    ``append`` fails.
    """

    name = TOOL_NAME

    def __init__(self, options: TodoOptions) -> None:
        self.options = options
        self.parameters: Mapping[str, Any] = parameters()

    @property
    def description(self) -> str:
        parallel = self.options.allow_parallel_in_progress
        return DESCRIPTION_PARALLEL if parallel else DESCRIPTION_SINGLE

    def execute(self, args: Any, call: ToolExec | None) -> TodoResult:
        session, result = self._prepare(args, call)
        written = _append(session, result)
        if _awaitable(written):
            if inspect.iscoroutine(written):
                written.close()  # never run, so nothing was appended
            raise UsageError(
                "this session's append is asynchronous: call `await tool.aexecute(...)`"
            )
        return result

    async def aexecute(self, args: Any, call: ToolExec | None) -> TodoResult:
        session, result = self._prepare(args, call)
        written = _append(session, result)
        if _awaitable(written):
            try:
                await written
            except Exception as error:
                raise _failure(error) from error
        return result

    def call(self, args: Any, session: Session) -> str:
        """Run one call owned by ``session``'s agent; return exactly the text the model reads.

        The core API for hosts and adapters that have a session but no exec
        context: a refused call returns its error text and records nothing; a
        failure to record raises :class:`ToolFailure` (answer the model with
        :data:`~dsh_tool_todo.contract.NOT_RECORDED` and log the cause).
        """
        try:
            return render_result(self.execute(args, _Owner(session)))
        except ToolCallRejected as rejected:
            return rejected.model_text

    async def acall(self, args: Any, session: Session) -> str:
        """:meth:`call` for asyncio hosts; the session's ``append`` may be a coroutine."""
        try:
            return render_result(await self.aexecute(args, _Owner(session)))
        except ToolCallRejected as rejected:
            return rejected.model_text

    def render(self, result: TodoResult) -> str:
        """The native renderer: the short confirmation the model reads."""
        return render_result(result)

    def _prepare(self, args: Any, call: ToolExec | None) -> tuple[Session, TodoResult]:
        agent = None if call is None else call.agent
        if agent is None:
            raise ToolCallRejected(NO_OWNER)
        result = validate_call(args, allow_parallel=self.options.allow_parallel_in_progress)
        return agent.session, result


class _Owner:
    """The exec context of a call owned by one session: it is its own agent."""

    __slots__ = ("session",)

    def __init__(self, session: Session) -> None:
        self.session = session

    @property
    def agent(self) -> _Owner:
        return self


def todo_write_tool(*, allow_parallel_in_progress: bool) -> TodoWriteTool:
    """The tool for a chosen option, without a host or a plugin manager.

    >>> from dsh_tool_todo.stores.memory import MemorySession
    >>> tool = todo_write_tool(allow_parallel_in_progress=False)
    >>> tool.call({"todos": [{"content": "Plan", "status": "in_progress"}]}, MemorySession())
    'Updated todo list: 0 pending, 1 in progress, 0 completed.'
    """
    return TodoWriteTool(TodoOptions.parse({"allowParallelInProgress": allow_parallel_in_progress}))


# The same template in %-form, about twice as fast per call as str.format.
_SUCCESS_PERCENT = SUCCESS_TEXT.replace("{", "%(").replace("}", ")d")


def render_result(result: TodoResult) -> str:
    """The native renderer: ``Updated todo list: <p> pending, <i> in progress, <c> completed.``"""
    return _SUCCESS_PERCENT % result["counts"]


def install_tool(ctx: PluginContext) -> TodoWriteTool:
    """Check this plugin's options and register the tool on ``ctx.tools``."""
    tool = TodoWriteTool(TodoOptions.from_context(ctx.options))
    ctx.tools.register(tool)
    return tool


def _append(session: Session, result: TodoResult) -> object:
    try:
        return session.append(EVENT_TYPE, {"todos": result["todos"]})
    except Exception as error:
        raise _failure(error) from error


def _awaitable(value: object) -> TypeGuard[Awaitable[object]]:
    # What collections.abc.Awaitable checks, without its ABC machinery on the hot path.
    return hasattr(value, "__await__")


def _failure(error: Exception) -> ToolFailure:
    return ToolFailure(f"{EVENT_TYPE} could not be appended: {error}")
