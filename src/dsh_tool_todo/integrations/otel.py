"""OpenTelemetry spans for ``todo_write`` calls, by the GenAI semantic conventions.

::

    from dsh_tool_todo.integrations.otel import instrument
    instrumentation = instrument()  # the global tracer provider; or tracer_provider=...
    ...
    instrumentation.uninstrument()

Once instrumented, every call — through the reference host, the core API
(``TodoWriteTool.call/acall/run/arun/execute/aexecute``) and every adapter, including an
adapter's refusal of a call that found no owner — is one
``execute_tool todo_write`` span of kind ``INTERNAL`` (extra ``otel``: the API only, the
SDK and exporters are the application's choice):

- ``gen_ai.operation.name`` ``execute_tool``, ``gen_ai.tool.name`` ``todo_write``,
  ``gen_ai.tool.type`` ``function``, and ``gen_ai.tool.call.id`` when the call has one;
- a recorded call: the plan's counts, ``dsh_todo.todos.pending``, ``.in_progress``,
  ``.completed`` and ``.count``;
- a refused call: ``error.type`` one of :data:`REFUSAL_CLASSES` (``_OTHER`` for a refusal
  outside them) and the span's status ``ERROR``; a call that could not be recorded:
  ``not_recorded``; any other exception: its fully qualified class name;
- the arguments and the text the model read (``gen_ai.tool.call.arguments``,
  ``gen_ai.tool.call.result``) and a failure's exception event only with
  ``capture_contents=True``: they hold the user's plan, and a store's error may quote it.

Why a switch on the tool class rather than a hook per tool: the adapters build their tool
inside (the MCP server, the OpenAI Agents ``FunctionTool``, the LangChain middleware, the
pydantic-ai toolset), so the class is the one place every call path meets, and it is how
OpenTelemetry's own instrumentors reach a library. The hot path stays exactly the
uninstrumented one until :func:`instrument` runs, and :meth:`Instrumentation.uninstrument`
puts it back. A host that holds its tool and wants no process-wide change passes
``tool=``: only that instance is instrumented. See ``docs/otel.md``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import threading
from collections.abc import Callable
from contextvars import Token
from types import MethodType
from typing import Any

from .. import __version__
from ..core._refusal_class import NOT_RECORDED_CLASS, OTHER, REFUSAL_CLASSES, refusal_class
from ..core.contract import SUCCESS_TEXT, TOOL_NAME
from ..core.listeners import LOGGER_NAME
from ..core.model import TodoResult
from ..core.tool import TodoWriteTool, render_result
from ..errors import ToolCallRejected, ToolFailure, UsageError
from ._core import NoOwnerWarning
from ._extras import missing_extra

try:
    from opentelemetry import context as otel_context
    from opentelemetry import trace
    from opentelemetry.context import Context
    from opentelemetry.trace import Span, SpanKind, Status, StatusCode, TracerProvider
except ImportError as _error:
    raise missing_extra(
        "dsh_tool_todo.integrations.otel", "otel", _error, module="opentelemetry"
    ) from _error

__all__ = [
    "OTHER",
    "REFUSAL_CLASSES",
    "SPAN_NAME",
    "Instrumentation",
    "instrument",
    "refusal_class",
]

SPAN_NAME = f"execute_tool {TOOL_NAME}"
"""The span's name: ``{gen_ai.operation.name} {gen_ai.tool.name}``."""

_STATIC = {
    "gen_ai.operation.name": "execute_tool",
    "gen_ai.tool.name": TOOL_NAME,
    "gen_ai.tool.type": "function",
}
# Where every path meets: call/acall go through run/arun (written out, the hot path);
# execute/aexecute and the adapters' core (integrations._core) through _record/_arecord.
_METHODS = ("run", "arun", "_record", "_arecord")
_ASYNC = ("arun", "_arecord")
_SUCCESS = re.compile(
    re.escape(SUCCESS_TEXT)
    .replace(re.escape("{pending}"), "([0-9]+)")
    .replace(re.escape("{inProgress}"), "([0-9]+)")
    .replace(re.escape("{completed}"), "([0-9]+)")
)
_log = logging.getLogger(LOGGER_NAME)
_lock = threading.Lock()  # instrument and uninstrument only: never taken by a call


class Instrumentation:
    """What :func:`instrument` returns: :meth:`uninstrument` restores the tool's methods."""

    def __init__(self, patched: list[tuple[Any, str, Any]]) -> None:
        self._patched = patched  # (class or instance, attribute, wrapper)

    @property
    def active(self) -> bool:
        """Whether this instrumentation is still in place."""
        return bool(self._patched)

    def uninstrument(self) -> None:
        """Put the uninstrumented methods back; calling it again does nothing."""
        with _lock:
            for target, name, wrapper in self._patched:
                original = wrapper.__wrapped__
                if isinstance(target, type):
                    if target.__dict__.get(name) is wrapper:
                        setattr(target, name, original)
                elif getattr(target.__dict__.get(name), "__func__", None) is wrapper:
                    delattr(target, name)
            self._patched = []


def instrument(
    *,
    tracer_provider: TracerProvider | None = None,
    capture_contents: bool = False,
    tool: TodoWriteTool | None = None,
) -> Instrumentation:
    """Make every ``todo_write`` call an ``execute_tool todo_write`` span.

    ``tracer_provider``: where spans go (default: the global one, also when it is set
    later). ``capture_contents``: also record the arguments, the text the model read and a
    failure's exception (off by default: they hold the user's plan). ``tool``: instrument
    only this tool instance; without it, every :class:`~dsh_tool_todo.core.tool.TodoWriteTool`
    in the process is instrumented, and so is the adapters' own refusal of a call that
    found no owner (it never reaches a tool), until :meth:`Instrumentation.uninstrument`.

    Instrumenting what is already instrumented raises
    :class:`~dsh_tool_todo.errors.UsageError`: uninstrument the first one.
    """
    if tool is not None and not isinstance(tool, TodoWriteTool):
        raise UsageError(
            f"instrument(tool=...) takes a TodoWriteTool, not {type(tool).__name__}: "
            "pass the tool your host or adapter calls, or no tool to instrument every one"
        )
    tracer = trace.get_tracer(__name__, __version__, tracer_provider=tracer_provider)
    spans = _Spans(tracer, capture_contents)
    with _lock:
        if tool is None:
            taken = [name for name in _METHODS if _is_ours(TodoWriteTool.__dict__[name])]
        else:
            taken = [name for name in _METHODS if name in vars(tool)]
        if taken:
            where = "every TodoWriteTool" if tool is None else "this tool"
            raise UsageError(
                f"{where} is already instrumented: call uninstrument() on the "
                "Instrumentation instrument() returned before instrumenting again"
            )
        patched: list[tuple[Any, str, Any]] = []
        for name in _METHODS:
            wrapper = spans.wrap(name, _unwrapped(TodoWriteTool.__dict__[name]))
            if tool is None:
                setattr(TodoWriteTool, name, wrapper)
                patched.append((TodoWriteTool, name, wrapper))
            else:  # an instance attribute shadows the class's method for this tool only
                setattr(tool, name, MethodType(wrapper, tool))
                patched.append((tool, name, wrapper))
        if tool is None:
            no_owner = spans.wrap_no_owner(_unwrapped(NoOwnerWarning.__dict__["__call__"]))
            setattr(NoOwnerWarning, "__call__", no_owner)  # noqa: B010
            patched.append((NoOwnerWarning, "__call__", no_owner))
    return Instrumentation(patched)


def _is_ours(function: object) -> bool:
    return getattr(function, "_dsh_otel", False) is True


def _unwrapped(function: Any) -> Any:
    return function.__wrapped__ if _is_ours(function) else function


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
        its span is made here (``NoOwnerWarning`` is called once per such call)."""
        start = self.start
        silent = self.silent

        def warned(warning: NoOwnerWarning) -> None:
            original(warning)
            if silent:
                return
            try:
                span = start(SPAN_NAME, None, SpanKind.INTERNAL, _STATIC)
                if span.is_recording():
                    _refused(span, "no_owner")
                span.end()
            except Exception as error:  # the refusal stands, whatever the tracer does
                _tracer_failed(error)

        return _marked(warned, "__call__", original)

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
            _refused(span, refusal_class(text))
        else:
            pending, in_progress, completed = map(int, counted.groups())
            _counts(span, pending, in_progress, completed)
        if self.contents:
            span.set_attribute("gen_ai.tool.call.result", text)

    def returned(self, span: Span, result: TodoResult) -> None:
        """``_record``/``_arecord`` (``execute``, ``aexecute``, the adapters): the result."""
        if not span.is_recording():
            return
        counts = result["counts"]
        _counts(span, counts["pending"], counts["inProgress"], counts["completed"])
        if self.contents:
            span.set_attribute("gen_ai.tool.call.result", render_result(result))

    def failed(self, span: Span, error: BaseException) -> None:
        if not span.is_recording():
            return
        if isinstance(error, ToolCallRejected):  # the _record path raises the refusal
            _refused(span, refusal_class(error.model_text))
            if self.contents:
                span.set_attribute("gen_ai.tool.call.result", error.model_text)
            return
        if isinstance(error, ToolFailure):
            kind = NOT_RECORDED_CLASS
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
