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

import threading
from types import MethodType
from typing import Any

from ...errors import UsageError
from .._binding import Binding, TodoWriteTool, refusals
from .._extras import needs_extra

with needs_extra("dsh_tool_todo.integrations.otel", "otel", module="opentelemetry"):
    from opentelemetry import trace
    from opentelemetry.trace import TracerProvider

from ._spans import _METHODS, _Spans
from ._spans import SPAN_NAME as SPAN_NAME  # importable here, as before

__all__ = [
    "OTHER",
    "Instrumentation",
    "instrument",
    "refusal_class",
]

OTHER = refusals.other
REFUSAL_CLASSES = refusals.classes
refusal_class = refusals.of

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
    tracer = trace.get_tracer(__name__, Binding.version, tracer_provider=tracer_provider)
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
            no_owner = spans.wrap_no_owner(_unwrapped(Binding.__dict__["refused"]))
            setattr(Binding, "refused", no_owner)  # noqa: B010
            patched.append((Binding, "refused", no_owner))
    return Instrumentation(patched)


def _is_ours(function: object) -> bool:
    return getattr(function, "_dsh_otel", False) is True


def _unwrapped(function: Any) -> Any:
    return function.__wrapped__ if _is_ours(function) else function
