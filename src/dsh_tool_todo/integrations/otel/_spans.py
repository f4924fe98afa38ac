"""The span of one ``todo_write`` call: the wrappers ``instrument`` puts on the tool's methods."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable, Mapping
from contextvars import Token
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from ...core.contract import SUCCESS_TEXT, TOOL_NAME
from ...errors import ToolCallRejected, ToolFailure
from .._binding import Binding, TodoWriteTool, refusals

SPAN_NAME = f"execute_tool {TOOL_NAME}"
"""The span's name: ``{gen_ai.operation.name} {gen_ai.tool.name}``."""

_STATIC = {
    "gen_ai.operation.name": "execute_tool",
    "gen_ai.tool.name": TOOL_NAME,
    "gen_ai.tool.type": "function",
}
# Where every path meets: call/acall go through run/arun (written out, the hot path);
# execute/aexecute and the adapters' binding (integrations._binding) through record/arecord.
_METHODS = ("run", "arun", "record", "arecord")
_ASYNC = ("arun", "arecord")
_SUCCESS = re.compile(
    re.escape(SUCCESS_TEXT)
    .replace(re.escape("{pending}"), "([0-9]+)")
    .replace(re.escape("{inProgress}"), "([0-9]+)")
    .replace(re.escape("{completed}"), "([0-9]+)")
)
_log = Binding.log


class _Spans:
    """The span of one call: started before, filled and ended after the tool's own method."""

    def __init__(self, tracer: trace.Tracer, capture_contents: bool) -> None:
        self.start = tracer.start_span
        self.contents = capture_contents
        # The API's no-op tracer (a NoOpTracerProvider's) answers every span with the current
        # one or an invalid one, never a span of its own: asking it changes nothing, so its
        # calls go straight through (the proxy of an unset global provider is still asked:
        # it starts recording once a provider is set).
        self.silent = type(tracer) is trace.NoOpTracer

    def wrap(self, name: str, original: Callable[..., Any]) -> Any:
        start = self.start
        opened = self.opened
        outcome = self.answered if name in ("run", "arun") else self.returned
        failed = self.failed
        kind = SpanKind.INTERNAL
        # What a no-op tracer answers outside any trace: one identity check says "nothing
        # to do". A sampled-out span still has a valid context and is made current, so the
        # store's spans under it are dropped with it rather than starting traces of their own.
        invalid = trace.INVALID_SPAN

        if self.silent:
            return _marked(_through(name, original), name, original)
        # The async and sync wrappers are twins, written out: a call's path stays one frame.
        if name in _ASYNC:

            async def wrapper(tool: TodoWriteTool, args: Any, call: Any) -> Any:
                span: Any = None
                token: Token[Context] | None = None
                try:
                    span = start(SPAN_NAME, None, kind, _STATIC)  # positional: cheaper
                    if span is invalid or not (
                        span.is_recording() or span.get_span_context().is_valid
                    ):
                        span = None  # a no-op provider: nothing kept
                    else:
                        token = opened(span, args, call)
                except Exception as error:
                    _abandoned(span, error)
                    span = None
                if span is None:
                    return await original(tool, args, call)
                try:
                    answer = await original(tool, args, call)
                except BaseException as error:
                    _guarded(failed, span, error)
                    raise
                else:
                    _guarded(outcome, span, answer)
                    return answer
                finally:
                    _close(span, token)

        else:

            def wrapper(tool: TodoWriteTool, args: Any, call: Any) -> Any:  # type: ignore[misc]
                span: Any = None
                token: Token[Context] | None = None
                try:
                    span = start(SPAN_NAME, None, kind, _STATIC)
                    if span is invalid or not (
                        span.is_recording() or span.get_span_context().is_valid
                    ):
                        span = None
                    else:
                        token = opened(span, args, call)
                except Exception as error:
                    _abandoned(span, error)
                    span = None
                if span is None:
                    return original(tool, args, call)
                try:
                    answer = original(tool, args, call)
                except BaseException as error:
                    _guarded(failed, span, error)
                    raise
                else:
                    _guarded(outcome, span, answer)
                    return answer
                finally:
                    _close(span, token)

        return _marked(wrapper, name, original)

    def wrap_no_owner(self, original: Callable[..., Any]) -> Any:
        """The adapters' refusal of a call that found no owner: decided before any tool, so
        its span is made here (``Binding.refused`` is called once per such call)."""
        start = self.start
        silent = self.silent

        def refused(binding: Binding) -> Any:
            outcome = original(binding)
            if silent:
                return outcome
            try:
                span = start(SPAN_NAME, None, SpanKind.INTERNAL, _STATIC)
                if span.is_recording():
                    _refused(span, "no_owner")
                span.end()
            except Exception as error:  # the refusal stands, whatever the tracer does
                _tracer_failed(error)
            return outcome

        return _marked(refused, "refused", original)

    def opened(self, span: Span, args: Any, call: Any) -> Token[Context]:
        """Make ``span`` current for the call (a store's own spans nest under it)."""
        call_id = getattr(call, "call_id", None)
        if isinstance(call_id, str) and call_id:
            span.set_attribute("gen_ai.tool.call.id", call_id)
        if self.contents:
            span.set_attribute("gen_ai.tool.call.arguments", _arguments_text(args))
        return otel_context.attach(trace.set_span_in_context(span))

    def answered(self, span: Span, text: str) -> None:
        """``run``/``arun``: the text the model reads says what happened."""
        if not span.is_recording():
            return
        counted = _SUCCESS.fullmatch(text)
        if counted is None:
            _refused(span, refusals.of(text))
        else:
            pending, in_progress, completed = map(int, counted.groups())
            _counts(span, pending, in_progress, completed)
        if self.contents:
            span.set_attribute("gen_ai.tool.call.result", text)

    def returned(self, span: Span, result: Mapping[str, Any]) -> None:
        """``record``/``arecord`` (``execute``, ``aexecute``, the adapters): the result."""
        if not span.is_recording():
            return
        counts = result["counts"]
        _counts(span, counts["pending"], counts["inProgress"], counts["completed"])
        if self.contents:
            text = SUCCESS_TEXT.format(
                pending=counts["pending"],
                inProgress=counts["inProgress"],
                completed=counts["completed"],
            )
            span.set_attribute("gen_ai.tool.call.result", text)

    def failed(self, span: Span, error: BaseException) -> None:
        if not span.is_recording():
            return
        if isinstance(error, ToolCallRejected):  # the record path raises the refusal
            _refused(span, refusals.of(error.model_text))
            if self.contents:
                span.set_attribute("gen_ai.tool.call.result", error.model_text)
            return
        if isinstance(error, ToolFailure):
            kind = refusals.not_recorded
        else:
            kind = f"{type(error).__module__}.{type(error).__qualname__}"
        span.set_attribute("error.type", kind)
        span.set_status(Status(StatusCode.ERROR, kind))
        if self.contents:  # the cause's text may quote the plan (a database's DETAIL line)
            span.record_exception(error)


def _tracer_failed(error: Exception) -> None:
    # A tracer, span processor or exporter that raises must never change a call's answer:
    # the call may already be recorded, and an exception would make the model retry it.
    _log.warning("todo_write's span could not be recorded: %r", error)


def _abandoned(span: Any, error: Exception) -> None:
    """A span that failed to start: reported, ended if it began; the call goes on without it."""
    _tracer_failed(error)
    if span is not None:
        with contextlib.suppress(Exception):
            span.end()


def _guarded(step: Callable[[Span, Any], None], span: Span, value: Any) -> None:
    try:
        step(span, value)
    except Exception as error:
        _tracer_failed(error)


def _close(span: Span, token: Token[Context] | None) -> None:
    if token is not None:
        otel_context.detach(token)  # the API's detach logs its own failures, never raises
    try:
        span.end()
    except Exception as error:  # a span processor's on_end, after the call has its answer
        _tracer_failed(error)


def _through(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    """The wrapper of a tracer that never records: the call, and nothing else."""
    if name in _ASYNC:

        async def through(tool: TodoWriteTool, args: Any, call: Any) -> Any:
            return await original(tool, args, call)

        return through

    def through_sync(tool: TodoWriteTool, args: Any, call: Any) -> Any:
        return original(tool, args, call)

    return through_sync


def _marked(wrapper: Any, name: str, original: Callable[..., Any]) -> Any:
    wrapper.__name__ = wrapper.__qualname__ = name
    wrapper.__doc__ = original.__doc__
    wrapper.__wrapped__ = original
    wrapper._dsh_otel = True
    return wrapper


def _refused(span: Span, kind: str) -> None:
    span.set_attribute("error.type", kind)
    span.set_status(Status(StatusCode.ERROR, kind))


def _counts(span: Span, pending: int, in_progress: int, completed: int) -> None:
    span.set_attributes(
        {
            "dsh_todo.todos.pending": pending,
            "dsh_todo.todos.in_progress": in_progress,
            "dsh_todo.todos.completed": completed,
            "dsh_todo.todos.count": pending + in_progress + completed,
        }
    )


def _arguments_text(args: Any) -> str:
    """The arguments as the JSON text the model sent (or the closest to it)."""
    if isinstance(args, str):
        return args
    if isinstance(args, (bytes, bytearray)):
        return bytes(args).decode("utf-8", "replace")
    try:
        return json.dumps(args, ensure_ascii=False, default=repr)
    except (TypeError, ValueError, RecursionError):  # a cycle, or keys JSON has no form for
        try:
            return repr(args)
        except Exception:  # a repr that fails, or nesting deeper than the interpreter's limit
            return f"<{type(args).__qualname__} that has no text form>"
