"""Row 1, instrumented: one ``todo_write`` call with :func:`instrument` on, vs the same call
without, in the same run.

The no-op provider is the budget (≤1.10x): an application that installs the API but exports
nothing pays almost nothing. The SDK row (a real span, kept by the in-memory exporter) is for
information: its cost is the SDK's. Each side switches the instrumentation on and off around
its own batch, untimed, so the plain and the instrumented calls interleave in rounds like
every other row's sides, and both run the same ``instrument()`` a host would call.
"""

from __future__ import annotations

from typing import Any

from bench_calls import HEADLINE, our_call
from report import Row, fmt_ns, skipped
from timing import Call, Side, batched, interleaved
from workloads import new_host, real_args

OTEL_TARGET = 1.10


def _instrumented(call: Call, provider: Any) -> Side:
    from dsh_tool_todo.integrations.otel import instrument

    timed = batched(call)

    def side(n: int) -> float:
        instrumentation = instrument(tracer_provider=provider)
        try:
            return timed(n)
        finally:
            instrumentation.uninstrument()

    return side


def rows(seconds: float) -> list[Row]:
    section = "1 call, instrumented"
    try:
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        from opentelemetry.trace import NoOpTracerProvider
    except ImportError:
        why = "opentelemetry-sdk not installed (extra `dev`)"
        return [skipped(section, f"{HEADLINE} items", why)]
    host = new_host()
    raw = real_args(HEADLINE)
    call, reset = our_call(host, raw)
    exporter = InMemorySpanExporter()
    sdk = TracerProvider()
    sdk.add_span_processor(SimpleSpanProcessor(exporter))

    def clear() -> None:
        reset()
        exporter.clear()

    result = interleaved(
        {
            "call": batched(call),
            "noop": _instrumented(call, NoOpTracerProvider()),
            "sdk": _instrumented(call, sdk),
            "api": _instrumented(call, None),
        },
        reference="call",
        seconds=seconds,
        reset=clear,
    )
    sdk.shutdown()
    ns = result.per_call_ns
    noop = result.ratio("noop", "call")
    recorded = result.ratio("sdk", "call")
    api = result.ratio("api", "call")
    return [
        Row(
            section,
            f"{HEADLINE} items, no-op provider",
            f"call_tool, instrument() {fmt_ns(ns['noop'])}",
            f"call_tool {fmt_ns(ns['call'])}",
            noop.median,
            target=f"≤{OTEL_TARGET}x",
            met=noop.median <= OTEL_TARGET,
            note=f"NoOpTracerProvider; middle half of rounds {noop.text()}",
            numbers=result.numbers("noop", "call"),
        ),
        Row(
            section,
            f"{HEADLINE} items, API only",
            f"call_tool, instrument() {fmt_ns(ns['api'])}",
            f"call_tool {fmt_ns(ns['call'])}",
            api.median,
            target="info",
            note="no tracer provider set: the API's proxy, which finds none; "
            f"middle half of rounds {api.text()}",
            numbers=result.numbers("api", "call"),
        ),
        Row(
            section,
            f"{HEADLINE} items, SDK",
            f"call_tool, instrument() {fmt_ns(ns['sdk'])}",
            f"call_tool {fmt_ns(ns['call'])}",
            recorded.median,
            target="info",
            note="the SDK's TracerProvider, SimpleSpanProcessor, InMemorySpanExporter; "
            f"middle half of rounds {recorded.text()}",
            numbers=result.numbers("sdk", "call"),
        ),
    ]
