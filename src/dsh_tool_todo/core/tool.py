"""The ``todo_write`` tool: one pure core, a sync and an async shell around the session write."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Mapping
from typing import Any, TypeGuard

from ..errors import AppendOutcomeUnknown, ToolCallRejected, ToolFailure, UsageError
from ..protocols import PluginContext, Session, ToolExec
from ._accept import accept_counted
from ._validation import judge, judge_fully, validate_call
from .contract import (
    CALL_ID_KEY,
    DESCRIPTION_PARALLEL,
    DESCRIPTION_SINGLE,
    EVENT_TYPE,
    NO_OWNER,
    SUCCESS_TEXT,
    TOOL_NAME,
)
from .model import TodoResult
from .options import TodoOptions
from .schema import parameters

__all__ = [
    "TodoWriteTool",
    "render_result",
    "todo_write_tool",
]


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
        # The success text by counts: formatting it costs several times a lookup, and a
        # session's plans repeat a few small counts.
        self._texts: dict[tuple[int, int, int], str] = {}

    @property
    def description(self) -> str:
        parallel = self.options.allow_parallel_in_progress
        return DESCRIPTION_PARALLEL if parallel else DESCRIPTION_SINGLE

    def execute(self, args: Any, call: ToolExec | None) -> TodoResult:
        """Check and record one call; return the canonical result.

        The result's ``todos`` is a copy of the recorded list, so a host that
        keeps or edits the result can never change what was recorded (hosts
        that only need the text call :meth:`run`, which makes no copy).
        """
        return _handed_out(self.record(args, call))

    async def aexecute(self, args: Any, call: ToolExec | None) -> TodoResult:
        """:meth:`execute` for sessions whose ``append`` is a coroutine or returns an awaitable."""
        return _handed_out(await self.arecord(args, call))

    def run(self, args: Any, call: ToolExec | None) -> str:
        """One call in an exec context; return exactly the text the model reads.

        A refused call returns its error text and records nothing; a failure to
        record raises :class:`ToolFailure`. What reference hosts call.
        """
        # record, _prepare, validate_call (judge's shortcut too), _append and render_result
        # written out: the per-call hot path. arun is its async twin, written out likewise.
        owner = isinstance(call, OwnedCall)  # its own agent: no property call to find it
        agent: Any = call if owner else None if call is None else call.agent
        if agent is None:
            return ToolCallRejected(NO_OWNER).model_text
        parallel = self.options.allow_parallel_in_progress
        counted = (
            accept_counted(args, parallel) if type(args) is str or type(args) is bytes else None
        )
        if counted is None:  # anything the shortcut does not accept whole: pydantic judges
            try:
                counted = judge_fully(args, parallel)
            except ToolCallRejected as rejected:
                return rejected.model_text
        data, counts = counted
        call_id = agent.call_id if owner else getattr(call, "call_id", None)
        if call_id is not None:
            data = _with_call_id(data, call_id)
        session = agent.session
        try:
            written = session.append(EVENT_TYPE, data)
        except Exception as error:
            raise _failure(error) from error
        if written is not None and type(written) is not dict:
            _check_sync_result(session, written)
        try:  # a subscript, not get(): no method call
            return self._texts[counts]
        except KeyError:
            return self._success_text(counts)

    async def arun(self, args: Any, call: ToolExec | None) -> str:
        """:meth:`run` for asyncio hosts; the session's ``append`` may be a coroutine."""
        # the async twin of :meth:`run`, written out (the hot path: no shared helper)
        agent = None if call is None else call.agent
        if agent is None:
            return ToolCallRejected(NO_OWNER).model_text
        try:
            data, counts = judge(args, self.options.allow_parallel_in_progress)
        except ToolCallRejected as rejected:
            return rejected.model_text
        call_id = getattr(call, "call_id", None)
        if call_id is not None:
            data = _with_call_id(data, call_id)
        session = agent.session
        try:
            written = session.append(EVENT_TYPE, data)
        except Exception as error:
            raise _failure(error) from error
        if _awaitable(written):
            try:
                await written
            except Exception as error:
                raise _failure(error) from error
        elif written is not None and type(written) is not dict:
            _refuse_generator(session, written)
        try:
            return self._texts[counts]
        except KeyError:
            return self._success_text(counts)

    def call(self, args: Any, session: Session, *, call_id: str | None = None) -> str:
        """Run one call owned by ``session``'s agent; return exactly the text the model reads.

        The core API for hosts and adapters that have a session but no exec
        context: a refused call returns its error text and records nothing; a
        failure to record raises :class:`ToolFailure` (answer the model with
        :data:`~dsh_tool_todo.core.contract.NOT_RECORDED` and log the cause).

        ``call_id``: the framework's id of this tool call, recorded beside the
        list (``callId``) so a store can recognise a retried call within the turn.
        """
        if not callable(getattr(session, "append", None)):
            raise _not_a_session("call", session)
        return self.run(args, OwnedCall(session, call_id))

    async def acall(self, args: Any, session: Session, *, call_id: str | None = None) -> str:
        """:meth:`call` for asyncio hosts; the session's ``append`` may be a coroutine."""
        if not callable(getattr(session, "append", None)):
            raise _not_a_session("acall", session)
        return await self.arun(args, OwnedCall(session, call_id))

    def _success_text(self, counts: tuple[int, int, int]) -> str:
        text = _SUCCESS_POSITIONAL % counts
        if len(self._texts) < _TEXTS_KEPT:
            self._texts[counts] = text
        return text

    def record(self, args: Any, call: ToolExec | None) -> TodoResult:
        """:meth:`execute` without the copy: the result as recorded, never to be changed.

        What :meth:`execute` and the adapters' binding (``integrations._binding``) call:
        the one place a call with an exec context is checked and recorded.
        """
        session, result = self._prepare(args, call)
        written = _append(session, result, getattr(call, "call_id", None))
        if written is not None and type(written) is not dict:
            _check_sync_result(session, written)
        return result

    async def arecord(self, args: Any, call: ToolExec | None) -> TodoResult:
        """:meth:`record` for sessions whose ``append`` may be a coroutine."""
        session, result = self._prepare(args, call)
        written = _append(session, result, getattr(call, "call_id", None))
        if _awaitable(written):
            try:
                await written
            except Exception as error:
                raise _failure(error) from error
        elif written is not None and type(written) is not dict:
            _refuse_generator(session, written)
        return result

    def render(self, result: TodoResult) -> str:
        """The native renderer: the short confirmation the model reads."""
        return render_result(result)

    def _prepare(self, args: Any, call: ToolExec | None) -> tuple[Session, TodoResult]:
        agent = None if call is None else call.agent
        if agent is None:
            raise ToolCallRejected(NO_OWNER)
        result = validate_call(args, allow_parallel=self.options.allow_parallel_in_progress)
        return agent.session, result


class OwnedCall:
    """The exec context of a call owned by one session: it is its own agent.

    The one owner-bound exec context: the core API and the adapters' binding
    build their calls with it, and the reference host's agents are one.
    :meth:`TodoWriteTool.run` reads its session and call id without asking for its ``agent``.
    """

    __slots__ = ("call_id", "session")

    def __init__(self, session: Session, call_id: str | None = None) -> None:
        self.session = session
        self.call_id = call_id

    @property
    def agent(self) -> OwnedCall:
        return self


def todo_write_tool(*, allow_parallel_in_progress: bool) -> TodoWriteTool:
    """The tool for a chosen option, without a host or a plugin manager.

    >>> from dsh_tool_todo.stores.memory import MemorySession
    >>> tool = todo_write_tool(allow_parallel_in_progress=False)
    >>> tool.call({"todos": [{"content": "Plan", "status": "in_progress"}]}, MemorySession())
    'Updated todo list: 0 pending, 1 in progress, 0 completed.'
    """
    return TodoWriteTool(TodoOptions.parse({"allowParallelInProgress": allow_parallel_in_progress}))


# The same template in %-form, about twice as fast per call as str.format; the counts
# go in as (pending, in_progress, completed), the order the hot path holds them in.
_SUCCESS_POSITIONAL = SUCCESS_TEXT.format(pending="%d", inProgress="%d", completed="%d")
_TEXTS_KEPT = 1024  # every split of up to 16 items (969): under 100 kB per tool


def render_result(result: TodoResult) -> str:
    """The native renderer: ``Updated todo list: <p> pending, <i> in progress, <c> completed.``"""
    counts = result["counts"]
    return _SUCCESS_POSITIONAL % (counts["pending"], counts["inProgress"], counts["completed"])


def install_tool(ctx: PluginContext) -> TodoWriteTool:
    """Check this plugin's options and register the tool on ``ctx.tools``."""
    tool = TodoWriteTool(TodoOptions.from_context(ctx.options))
    ctx.tools.register(tool)
    return tool


def _not_a_session(method: str, session: object) -> UsageError:
    """A program's mistake, not a failure to record: answering the model NOT_RECORDED for
    it would hide it behind a text the model reads as "try again"."""
    return UsageError(
        f"todo_write.{method}(args, session): session is the session log the plan is appended "
        "to, with an append(type, data) method (e.g. dsh_tool_todo.stores.memory.MemorySession()"
        f"), not {type(session).__qualname__}: nothing was recorded"
    )


def _append(session: Session, result: TodoResult, call_id: object) -> object:
    data: dict[str, Any] = {"todos": result["todos"]}
    if call_id is not None:
        data = _with_call_id(data, call_id)
    try:
        return session.append(EVENT_TYPE, data)
    except Exception as error:
        raise _failure(error) from error


def _with_call_id(data: Mapping[str, Any], call_id: object) -> dict[str, Any]:
    """The event data with the call's id beside the list (a new dict: ``data`` may be shared)."""
    if type(call_id) is not str or not call_id:
        raise UsageError(
            f"call_id must be a non-empty str (the framework's tool-call id) or None, "
            f"not {call_id!r}: nothing was recorded"
        )
    return {"todos": data["todos"], CALL_ID_KEY: call_id}


def _handed_out(result: TodoResult) -> TodoResult:
    # Items are flat {content, status} dicts of strings: a copy of each is deep enough.
    return {"todos": [item.copy() for item in result["todos"]], "counts": result["counts"]}


def _check_sync_result(session: Session, written: object) -> None:
    """What the sync path got back is not a recorded event: say exactly what is known.

    - a coroutine from an ``async def append`` that has not started: it is
      closed, never run, so nothing was recorded;
    - a generator (or async generator) from a generator-function ``append``
      that has not started: its body never ran, so nothing was recorded;
    - any other awaitable (a ``Task``, a ``Future``, a coroutine made by a
      plain function that may have recorded first): the outcome is unknown.
    """
    if inspect.iscoroutine(written):
        if inspect.getcoroutinestate(written) == inspect.CORO_CREATED and (
            inspect.iscoroutinefunction(session.append)
        ):
            written.close()
            raise UsageError(
                "this session's append is asynchronous, so nothing was recorded: "
                "call `await tool.aexecute(...)` (or `acall`, `Host.acall_tool`)"
            )
        if inspect.getcoroutinestate(written) == inspect.CORO_CREATED:
            written.close()  # nobody will await it; what append did before is done
        raise _unknown_outcome(session, written)
    if _awaitable(written):
        raise _unknown_outcome(session, written)
    _refuse_generator(session, written)


def _refuse_generator(session: Session, written: object) -> None:
    if inspect.isgenerator(written) or inspect.isasyncgen(written):
        unstarted = (
            inspect.isgenerator(written)
            and inspect.isgeneratorfunction(session.append)
            and inspect.getgeneratorstate(written) == inspect.GEN_CREATED
        ) or (  # an async generator function's call returns a fresh, unstarted one
            inspect.isasyncgen(written) and inspect.isasyncgenfunction(session.append)
        )
        if unstarted:
            if inspect.isgenerator(written):
                written.close()
            raise UsageError(
                f"this session's append is a generator function ({type(written).__name__}): "
                "its body never ran, so nothing was recorded; append must record the event "
                "before it returns"
            )
        raise UsageError(
            f"this session's append returned a {type(written).__name__}, not the recorded "
            "event: whether the event was recorded is unknown; check the log"
        )


def _unknown_outcome(session: Session, written: object) -> AppendOutcomeUnknown:
    kind = type(written)
    return AppendOutcomeUnknown(
        f"this session's append returned {kind.__module__}.{kind.__qualname__}, an awaitable "
        "that may already have run: the event may have been recorded; check the log before "
        "calling again, and call this session through `await tool.aexecute(...)` "
        "(or `acall`, `Host.acall_tool`)"
    )


def _awaitable(value: object) -> TypeGuard[Awaitable[object]]:
    # What collections.abc.Awaitable checks, without its ABC machinery on the hot path.
    return hasattr(value, "__await__")


def _failure(error: Exception) -> ToolFailure:
    return ToolFailure(f"{EVENT_TYPE} could not be appended: {error}")
