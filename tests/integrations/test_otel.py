"""OpenTelemetry spans: one ``execute_tool todo_write`` span per call on every path, read back
with the SDK's in-memory exporter."""

from __future__ import annotations

import asyncio
import importlib.metadata
import importlib.util
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF
from opentelemetry.trace import NoOpTracerProvider, SpanKind, StatusCode

from dsh_tool_todo import UsageError, todo_write_tool
from dsh_tool_todo.core import contract
from dsh_tool_todo.core.tool import TodoWriteTool
from dsh_tool_todo.errors import ToolCallRejected, ToolFailure
from dsh_tool_todo.host import AsyncMemorySession, Host
from dsh_tool_todo.integrations._binding import Binding
from dsh_tool_todo.integrations.otel import (
    OTHER,
    REFUSAL_CLASSES,
    SPAN_NAME,
    Instrumentation,
    instrument,
)
from dsh_tool_todo.stores.memory import MemorySession
from tests.conftest import todo

PLAN = {"todos": [todo("Read the code", "completed"), todo("Fix the bug", "in_progress")]}
SECRET = "Rotate the production database password"
COUNTS = {
    "dsh_todo.todos.pending": 0,
    "dsh_todo.todos.in_progress": 1,
    "dsh_todo.todos.completed": 1,
    "dsh_todo.todos.count": 2,
}
GEN_AI = {
    "gen_ai.operation.name": "execute_tool",
    "gen_ai.tool.name": "todo_write",
    "gen_ai.tool.type": "function",
}


class Traced:
    """An SDK tracer provider whose finished spans are kept in memory."""

    def __init__(self, **options: Any) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider(**options)
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def tool_spans(self) -> list[ReadableSpan]:
        return [span for span in self.spans() if span.name == SPAN_NAME]

    def by_call_id(self) -> dict[object, ReadableSpan]:
        """The tool spans by call id: parallel calls may end in either order."""
        spans = {
            (span.attributes or {}).get("gen_ai.tool.call.id"): span for span in self.tool_spans()
        }
        assert len(spans) == len(self.tool_spans()), "two spans share a call id"
        return spans

    def one(self) -> ReadableSpan:
        (span,) = self.tool_spans()
        self.exporter.clear()
        return span


@pytest.fixture
def traced() -> Iterator[Traced]:
    kept = Traced()
    instrumentation = instrument(tracer_provider=kept.provider)
    try:
        yield kept
    finally:
        instrumentation.uninstrument()
        kept.provider.shutdown()


def attributes(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def assert_recorded(span: ReadableSpan, **extra: Any) -> None:
    assert span.name == "execute_tool todo_write"
    assert span.kind is SpanKind.INTERNAL
    assert attributes(span) == {**GEN_AI, **COUNTS, **extra}
    assert span.status.status_code is StatusCode.UNSET


def assert_refused(span: ReadableSpan, kind: str, **extra: Any) -> None:
    assert span.name == SPAN_NAME
    assert attributes(span) == {**GEN_AI, "error.type": kind, **extra}
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == kind
    assert not span.events


class Exec:
    """An exec context with a call id, as a host or adapter hands one to run/execute."""

    def __init__(self, session: Any, call_id: Any = None) -> None:
        self.session = session
        self.call_id = call_id

    @property
    def agent(self) -> Exec:
        return self


class FailingSession(MemorySession):
    def append(self, type: str, data: Any) -> Any:
        raise OSError(f"disk full while writing {json.dumps(data)}")


# --- the reference host and the core API ------------------------------------------------------


def test_a_host_call_is_one_execute_tool_span_with_the_plans_counts(
    traced: Traced, host: Host
) -> None:
    agent = host.new_agent()
    text = host.call_tool("todo_write", json.dumps(PLAN), agent=agent)
    assert text == "Updated todo list: 0 pending, 1 in progress, 1 completed."
    assert_recorded(traced.one())
    assert host.call_tool("todo_write", {"todos": "[]"}, agent=agent).startswith("Error")
    assert_refused(traced.one(), "stringified_array")


def test_a_host_acall_on_an_async_session_is_one_span(traced: Traced, host: Host) -> None:
    agent = host.new_agent(session=AsyncMemorySession())
    asyncio.run(host.acall_tool("todo_write", PLAN, agent=agent))
    assert_recorded(traced.one())


@pytest.mark.parametrize("method", ["call", "acall", "run", "arun", "execute", "aexecute"])
def test_every_core_entry_point_is_exactly_one_span(traced: Traced, method: str) -> None:
    tool = todo_write_tool(allow_parallel_in_progress=False)
    session = MemorySession()
    target = session if method in ("call", "acall") else Exec(session)
    answer = getattr(tool, method)(PLAN, target)
    if asyncio.iscoroutine(answer):
        answer = asyncio.run(answer)
    assert session.events[-1]["data"] == PLAN
    assert_recorded(traced.one())


@pytest.mark.parametrize("method", ["run", "arun", "execute", "aexecute"])
def test_the_exec_contexts_call_id_is_the_spans_call_id(traced: Traced, method: str) -> None:
    tool = todo_write_tool(allow_parallel_in_progress=False)
    answer = getattr(tool, method)(PLAN, Exec(MemorySession(), call_id="call_7Qx"))
    if asyncio.iscoroutine(answer):
        asyncio.run(answer)
    assert_recorded(traced.one(), **{"gen_ai.tool.call.id": "call_7Qx"})


def test_a_call_without_an_id_has_no_call_id(traced: Traced) -> None:
    tool = todo_write_tool(allow_parallel_in_progress=False)
    tool.run(PLAN, Exec(MemorySession(), call_id=None))
    assert_recorded(traced.one())


@pytest.mark.parametrize("call_id", ["", 7])
def test_an_unusable_call_id_is_the_hosts_mistake(traced: Traced, call_id: Any) -> None:
    tool = todo_write_tool(allow_parallel_in_progress=False)
    with pytest.raises(UsageError, match="call_id must be a non-empty str"):
        tool.run(PLAN, Exec(MemorySession(), call_id=call_id))
    assert_refused(traced.one(), "dsh_tool_todo.errors.UsageError")


# --- the refusal classes -------------------------------------------------------------------------

REFUSED = [
    ("unknown_key", {**PLAN, "merge": True}),
    ("unknown_key", {"todos": [{**todo("Plan"), "id": "1"}]}),
    ("unknown_key", {"todos": [{"title": "Plan", "status": "pending"}]}),
    ("unknown_key", {"items": [todo("Plan")]}),
    ("invalid_status", {"todos": [todo("Plan", "done")]}),
    ("invalid_status", {"todos": [todo("Plan", "done"), todo("Ship", "blocked")]}),
    ("stringified_array", {"todos": json.dumps([todo("Plan")])}),
    ("stringified_array", {"items": json.dumps([todo("Plan")])}),
    ("empty_content", {"todos": [todo("  ")]}),
    ("empty_content", {"todos": [todo(""), todo("a"), todo("a")]}),
    ("duplicate_content", {"todos": [todo("Plan"), todo("Plan")]}),
    ("too_many_in_progress", {"todos": [todo("A", "in_progress"), todo("B", "in_progress")]}),
    (OTHER, "{not json"),
    (OTHER, [todo("Plan")]),
    (OTHER, {}),
    (OTHER, {"todos": [{"content": "Plan"}]}),
    (OTHER, {"todos": [{"content": 3, "status": "pending"}]}),
    (OTHER, {"todos": ["Plan"]}),
]


@pytest.mark.parametrize(("kind", "args"), REFUSED)
def test_each_refusal_has_its_class_on_the_text_path(traced: Traced, kind: str, args: Any) -> None:
    session = MemorySession()
    text = todo_write_tool(allow_parallel_in_progress=False).call(args, session)
    assert text.startswith("Error: ")
    assert session.events == []
    assert_refused(traced.one(), kind)


@pytest.mark.parametrize(("kind", "args"), REFUSED)
def test_each_refusal_has_its_class_on_the_raising_path(
    traced: Traced, kind: str, args: Any
) -> None:
    tool = todo_write_tool(allow_parallel_in_progress=False)
    with pytest.raises(ToolCallRejected, match=r"^Error: "):
        tool.execute(args, Exec(MemorySession()))
    assert_refused(traced.one(), kind)


def test_every_documented_class_but_not_recorded_comes_from_a_real_refusal() -> None:
    refusals = {kind for kind, _ in REFUSED} | {"no_owner"}
    assert set(REFUSAL_CLASSES) == refusals - {OTHER} | {"not_recorded"}


@pytest.mark.parametrize("method", ["run", "execute"])
def test_a_call_without_an_owner_is_no_owner(traced: Traced, method: str) -> None:
    tool = todo_write_tool(allow_parallel_in_progress=False)
    if method == "run":
        assert tool.run(PLAN, None) == contract.NO_OWNER
    else:
        with pytest.raises(ToolCallRejected, match="owning agent session"):
            tool.execute(PLAN, None)
    assert_refused(traced.one(), "no_owner")


@pytest.mark.parametrize("method", ["call", "acall", "execute", "aexecute"])
def test_a_failure_to_record_is_not_recorded_and_keeps_its_cause_out(
    traced: Traced, method: str
) -> None:
    tool = todo_write_tool(allow_parallel_in_progress=False)
    plan = {"todos": [todo(SECRET, "in_progress")]}
    target = FailingSession() if method.endswith("call") else Exec(FailingSession())

    def call() -> None:
        answer = getattr(tool, method)(plan, target)
        if asyncio.iscoroutine(answer):
            asyncio.run(answer)

    with pytest.raises(ToolFailure, match="disk full"):
        call()
    span = traced.one()
    assert_refused(span, "not_recorded")
    assert SECRET not in repr(span.to_json())


def test_a_hosts_mistake_is_its_exception_class(traced: Traced) -> None:
    class AsyncOnly(MemorySession):
        async def append(self, type: str, data: Any) -> Any:  # type: ignore[override]
            return None

    with pytest.raises(UsageError, match="asynchronous"):
        todo_write_tool(allow_parallel_in_progress=False).call(PLAN, AsyncOnly())
    assert_refused(traced.one(), "dsh_tool_todo.errors.UsageError")


# --- contents ----------------------------------------------------------------------------------


def test_contents_are_off_by_default(traced: Traced) -> None:
    tool = todo_write_tool(allow_parallel_in_progress=False)
    tool.call({"todos": [todo(SECRET, "in_progress")]}, MemorySession())
    tool.call({"todos": [todo(SECRET, "done")]}, MemorySession())
    spans = traced.tool_spans()
    assert len(spans) == 2
    for span in spans:
        assert SECRET not in span.to_json()
        assert not {"gen_ai.tool.call.arguments", "gen_ai.tool.call.result"} & set(attributes(span))


def test_contents_when_asked_for() -> None:
    kept = Traced()
    instrumentation = instrument(tracer_provider=kept.provider, capture_contents=True)
    try:
        tool = todo_write_tool(allow_parallel_in_progress=False)
        raw = json.dumps({"todos": [todo(SECRET, "in_progress")]})
        tool.call(raw, MemorySession())
        refused = tool.call({"todos": [todo(SECRET, "done")]}, MemorySession())
        with pytest.raises(ToolFailure):
            tool.execute({"todos": [todo(SECRET)]}, Exec(FailingSession()))
    finally:
        instrumentation.uninstrument()
    good, bad, failed = kept.tool_spans()
    assert attributes(good)["gen_ai.tool.call.arguments"] == raw
    assert attributes(good)["gen_ai.tool.call.result"] == (
        "Updated todo list: 0 pending, 1 in progress, 0 completed."
    )
    assert json.loads(attributes(bad)["gen_ai.tool.call.arguments"]) == {
        "todos": [todo(SECRET, "done")]
    }
    assert attributes(bad)["gen_ai.tool.call.result"] == refused
    (event,) = failed.events
    assert event.name == "exception"
    assert SECRET in str((event.attributes or {})["exception.message"])


@pytest.mark.parametrize("args", [b'{"todos": []}', {"todos": [{1, 2}]}, {"todos": []}])
def test_arguments_of_any_shape_have_a_text_form(args: Any) -> None:
    kept = Traced()
    instrumentation = instrument(tracer_provider=kept.provider, capture_contents=True)
    try:
        nested: list[Any] = []
        cyclic: list[Any] = [nested]
        nested.append(cyclic)
        tool = todo_write_tool(allow_parallel_in_progress=False)
        tool.call(args, MemorySession())
        tool.call({"todos": cyclic}, MemorySession())
    finally:
        instrumentation.uninstrument()
    for span in kept.tool_spans():
        assert isinstance(attributes(span)["gen_ai.tool.call.arguments"], str)


# --- switching it on and off ---------------------------------------------------------------------


def test_uninstrument_puts_the_plain_methods_back() -> None:
    plain = {name: TodoWriteTool.__dict__[name] for name in ("run", "arun", "record", "arecord")}
    warning = Binding.__dict__["refused"]
    kept = Traced()
    instrumentation = instrument(tracer_provider=kept.provider)
    assert isinstance(instrumentation, Instrumentation)
    assert instrumentation.active
    assert TodoWriteTool.__dict__["run"] is not plain["run"]
    instrumentation.uninstrument()
    instrumentation.uninstrument()  # a second time does nothing
    assert not instrumentation.active
    assert {name: TodoWriteTool.__dict__[name] for name in plain} == plain
    assert Binding.__dict__["refused"] is warning
    todo_write_tool(allow_parallel_in_progress=False).call(PLAN, MemorySession())
    assert kept.spans() == []


def test_instrumenting_twice_is_refused_until_the_first_is_undone(traced: Traced) -> None:
    with pytest.raises(UsageError, match=r"already instrumented: call uninstrument\(\)"):
        instrument()
    tool = todo_write_tool(allow_parallel_in_progress=False)
    tool.call(PLAN, MemorySession())
    assert len(traced.tool_spans()) == 1  # still one span per call


def test_one_tool_alone_can_be_instrumented(host: Host) -> None:
    kept = Traced()
    mine = todo_write_tool(allow_parallel_in_progress=False)
    other = todo_write_tool(allow_parallel_in_progress=False)
    instrumentation = instrument(tracer_provider=kept.provider, tool=mine)
    try:
        with pytest.raises(UsageError, match="this tool is already instrumented"):
            instrument(tool=mine)
        other.call(PLAN, MemorySession())
        assert kept.spans() == []
        mine.call(PLAN, MemorySession())
        host.tools.pop("todo_write")
        host.tools.register(mine)
        host.call_tool("todo_write", PLAN, agent=host.new_agent())
        assert len(kept.tool_spans()) == 2
    finally:
        instrumentation.uninstrument()
    assert "run" not in vars(mine)
    mine.call(PLAN, MemorySession())
    assert len(kept.tool_spans()) == 2


def test_one_tool_and_every_tool_at_once_make_one_span_per_call() -> None:
    everywhere, alone = Traced(), Traced()
    tool = todo_write_tool(allow_parallel_in_progress=False)
    first = instrument(tracer_provider=everywhere.provider)
    second = instrument(tracer_provider=alone.provider, tool=tool)
    try:
        tool.call(PLAN, MemorySession())
        todo_write_tool(allow_parallel_in_progress=False).call(PLAN, MemorySession())
    finally:
        first.uninstrument()
        second.uninstrument()
    assert len(alone.tool_spans()) == 1
    assert len(everywhere.tool_spans()) == 1


def test_instrument_takes_only_a_todo_write_tool() -> None:
    with pytest.raises(UsageError, match="takes a TodoWriteTool, not str"):
        instrument(tool="todo_write")  # type: ignore[arg-type]


def test_a_no_op_provider_records_nothing_and_changes_no_answer() -> None:
    instrumentation = instrument(tracer_provider=NoOpTracerProvider())
    try:
        tool = todo_write_tool(allow_parallel_in_progress=False)
        assert tool.call(PLAN, MemorySession()).startswith("Updated todo list")
        assert tool.call({}, MemorySession()).startswith("Error")
    finally:
        instrumentation.uninstrument()


def test_a_sampled_out_call_still_answers_and_exports_nothing() -> None:
    kept = Traced(sampler=ALWAYS_OFF)
    instrumentation = instrument(tracer_provider=kept.provider)
    try:
        tool = todo_write_tool(allow_parallel_in_progress=False)
        assert tool.call(PLAN, MemorySession()).startswith("Updated todo list")
        assert tool.run({}, None) == contract.NO_OWNER
    finally:
        instrumentation.uninstrument()
    assert kept.spans() == []


def test_the_stores_own_spans_nest_under_the_tool_span(traced: Traced) -> None:
    tracer = traced.provider.get_tracer("a store")

    class TracedSession(MemorySession):
        def append(self, type: str, data: Any) -> Any:
            with tracer.start_as_current_span("INSERT todo/write"):
                return super().append(type, data)

    outer = traced.provider.get_tracer("an agent").start_as_current_span("invoke_agent")
    with outer as agent_span:
        todo_write_tool(allow_parallel_in_progress=False).call(PLAN, TracedSession())
    store, tool_span, agent = traced.spans()
    assert tool_span.name == SPAN_NAME
    assert tool_span.parent is not None
    assert tool_span.parent.span_id == agent_span.get_span_context().span_id
    assert store.parent is not None
    assert store.parent.span_id == tool_span.context.span_id
    assert agent.name == "invoke_agent"
    assert trace.get_current_span() is trace.INVALID_SPAN  # the context was put back


# --- every adapter -------------------------------------------------------------------------------


def test_the_langchain_middleware_makes_one_span_per_call(traced: Traced) -> None:
    from langchain.agents import create_agent
    from langchain_core.messages import AIMessage, HumanMessage

    from dsh_tool_todo.integrations.langchain import TodoWriteMiddleware
    from tests.integrations.scripted_langchain import ScriptedChatModel, tool_calls

    script = [
        tool_calls(("todo_write", {**PLAN, "merge": True}), ("todo_write", PLAN)),
        AIMessage("done"),
    ]
    model = ScriptedChatModel(script=script)
    agent = create_agent(model, middleware=[TodoWriteMiddleware(allow_parallel_in_progress=False)])
    agent.invoke({"messages": [HumanMessage("plan it")]})
    # LangChain runs the two calls on two threads: their spans end in either order
    spans = traced.by_call_id()
    assert set(spans) == {"call-0", "call-1"}
    assert_refused(spans["call-0"], "unknown_key", **{"gen_ai.tool.call.id": "call-0"})
    assert_recorded(spans["call-1"], **{"gen_ai.tool.call.id": "call-1"})


def test_the_openai_agents_tool_makes_one_span_per_call(traced: Traced) -> None:
    from agents import Agent, RunConfig, Runner
    from agents.testing import ScriptedModel, assistant_message, function_call

    from dsh_tool_todo.integrations.openai_agents import todo_write_function_tool

    tool = todo_write_function_tool(allow_parallel_in_progress=False, owner="me")
    model = ScriptedModel(
        [
            [function_call("todo_write", {**PLAN, "merge": True}, call_id="bad")],
            [function_call("todo_write", PLAN, call_id="good")],
            [assistant_message("done")],
        ]
    )
    agent = Agent(name="planner", model=model, tools=[tool])
    asyncio.run(Runner.run(agent, "plan it", run_config=RunConfig(tracing_disabled=True)))
    refused, recorded = traced.tool_spans()
    assert_refused(refused, "unknown_key", **{"gen_ai.tool.call.id": "bad"})
    assert_recorded(recorded, **{"gen_ai.tool.call.id": "good"})


def test_an_openai_agents_call_without_an_owner_is_a_no_owner_span(traced: Traced) -> None:
    from agents import Agent, RunConfig, Runner
    from agents.testing import ScriptedModel, assistant_message, function_call

    from dsh_tool_todo.integrations.openai_agents import todo_write_function_tool

    tool = todo_write_function_tool(allow_parallel_in_progress=False, owner=lambda ctx: None)
    model = ScriptedModel(
        [[function_call("todo_write", PLAN, call_id="c")], [assistant_message("done")]]
    )
    agent = Agent(name="planner", model=model, tools=[tool])
    asyncio.run(Runner.run(agent, "plan it", run_config=RunConfig(tracing_disabled=True)))
    assert_refused(traced.one(), "no_owner")


def test_the_pydantic_ai_toolset_makes_one_span_per_call(
    traced: Traced, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pydantic_ai.models
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from dsh_tool_todo.integrations.pydantic_ai import todo_write_toolset

    monkeypatch.setattr(pydantic_ai.models, "ALLOW_MODEL_REQUESTS", False)

    def script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart("todo_write", dict(PLAN), "c0")])
        return ModelResponse(parts=[TextPart("done")])

    toolset = todo_write_toolset(allow_parallel_in_progress=False)
    agent = Agent(FunctionModel(script), toolsets=[toolset])
    session = MemorySession()
    asyncio.run(agent.run("plan it", deps=session))
    assert session.events[-1]["data"] == {**PLAN, "callId": "c0"}
    assert_recorded(traced.one(), **{"gen_ai.tool.call.id": "c0"})
    asyncio.run(agent.run("plan it", deps=None))  # no session: refused before any tool
    assert_refused(traced.one(), "no_owner")


def test_the_mcp_server_makes_one_span_per_call(traced: Traced) -> None:
    from dsh_tool_todo.integrations.mcp import build_server
    from tests.integrations.test_mcp import results_of_calls

    server = build_server(allow_parallel_in_progress=False)
    refused, recorded = results_of_calls(server, {**PLAN, "merge": True}, PLAN)
    assert refused.isError
    assert not recorded.isError
    first, second = traced.tool_spans()
    assert_refused(first, "unknown_key")
    assert_recorded(second)


# --- hostile use ---------------------------------------------------------------------------------


def test_a_cancelled_call_ends_its_span_and_puts_the_context_back(traced: Traced) -> None:
    class Stuck(AsyncMemorySession):
        async def append(self, type: str, data: Any) -> Any:  # type: ignore[override]
            await asyncio.Event().wait()

    async def main() -> None:
        task = asyncio.ensure_future(
            todo_write_tool(allow_parallel_in_progress=False).acall(PLAN, Stuck())
        )
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert trace.get_current_span() is trace.INVALID_SPAN

    asyncio.run(main())
    assert_refused(traced.one(), f"{asyncio.CancelledError.__module__}.CancelledError")


def test_switching_on_and_off_while_threads_call_changes_no_answer() -> None:
    import threading

    kept = Traced()
    tool = todo_write_tool(allow_parallel_in_progress=False)
    answers: list[str] = []
    failures: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(300):
                answers.append(tool.call(PLAN, MemorySession()))
        except BaseException as error:  # pragma: no cover - the assertion below names it
            failures.append(error)

    threads = [threading.Thread(target=work) for _ in range(3)]
    for thread in threads:
        thread.start()
    for _ in range(50):
        instrument(tracer_provider=kept.provider).uninstrument()
    for thread in threads:
        thread.join()
    assert failures == []
    assert set(answers) == {"Updated todo list: 0 pending, 1 in progress, 1 completed."}
    assert len(answers) == 900
    assert all(attributes(span)["dsh_todo.todos.count"] == 2 for span in kept.tool_spans())
    assert TodoWriteTool.__dict__["run"].__name__ == "run"
    assert not hasattr(TodoWriteTool.__dict__["run"], "_dsh_otel")


def test_a_call_made_inside_a_call_is_its_child(traced: Traced) -> None:
    tool = todo_write_tool(allow_parallel_in_progress=False)

    class Reentrant(MemorySession):
        def append(self, type: str, data: Any) -> Any:
            if not self.events:
                tool.call({"todos": [todo("Inner")]}, MemorySession())
            return super().append(type, data)

    tool.call(PLAN, Reentrant())
    inner, outer = traced.tool_spans()
    assert inner.parent is not None
    assert inner.parent.span_id == outer.context.span_id
    assert attributes(inner)["dsh_todo.todos.count"] == 1


# --- a tracer that raises never changes a call's answer ------------------------------------------


class RaisingProcessor(SpanProcessor):
    """A span processor (or the exporter behind it) that fails at one step of every span."""

    def __init__(self, step: str) -> None:
        self.step = step

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        if self.step == "start":
            raise RuntimeError("span processor down at on_start")

    def on_end(self, span: Any) -> None:
        if self.step == "end":
            raise RuntimeError("exporter down at on_end")


class RaisingSpan:
    """A span whose attribute setters raise (a vendor's span, a broken attribute limit)."""

    def is_recording(self) -> bool:
        return True

    def get_span_context(self) -> Any:
        raise AssertionError("is_recording answered already")

    def set_attribute(self, key: str, value: Any) -> None:
        raise ValueError(f"attribute {key} refused")

    set_attributes = set_attribute
    set_status = set_attribute

    def end(self) -> None:
        raise RuntimeError("span cannot end")


class RaisingTracer(trace.Tracer):
    def __init__(self, where: str) -> None:
        self.where = where

    def start_span(self, *args: Any, **kwargs: Any) -> Any:
        if self.where == "start_span":
            raise RuntimeError("tracer down")
        return RaisingSpan()

    def start_as_current_span(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


class RaisingProvider(trace.TracerProvider):
    def __init__(self, where: str) -> None:
        self.where = where

    def get_tracer(self, *args: Any, **kwargs: Any) -> trace.Tracer:
        return RaisingTracer(self.where)


def raising_provider(where: str) -> Any:
    if where in ("start", "end"):
        provider = TracerProvider()
        provider.add_span_processor(RaisingProcessor(where))
        return provider
    return RaisingProvider(where)


@pytest.mark.parametrize("where", ["start", "end", "start_span", "span_methods"])
@pytest.mark.parametrize("method", ["call", "acall", "execute", "aexecute", "no_owner"])
def test_a_tracer_that_raises_changes_no_answer_and_records_once(
    where: str, method: str, caplog: pytest.LogCaptureFixture
) -> None:
    instrumentation = instrument(tracer_provider=raising_provider(where))
    session = MemorySession()
    tool = todo_write_tool(allow_parallel_in_progress=False)
    try:
        if method == "call":
            answer: Any = tool.call(PLAN, session, call_id="c1")
        elif method == "acall":
            answer = asyncio.run(tool.acall(PLAN, session, call_id="c1"))
        elif method == "execute":
            answer = tool.execute(PLAN, Exec(session, "c1"))["counts"]
        elif method == "aexecute":
            answer = asyncio.run(tool.aexecute(PLAN, Exec(session, "c1")))["counts"]
        else:
            Binding("test", allow_parallel_in_progress=False, remedy="an owner").refused()
            answer = None
    finally:
        instrumentation.uninstrument()
    if method in ("call", "acall"):
        assert answer == "Updated todo list: 0 pending, 1 in progress, 1 completed."
    elif method != "no_owner":
        assert answer == {"pending": 0, "inProgress": 1, "completed": 1}
    if method != "no_owner":
        assert [event["data"] for event in session.events] == [{**PLAN, contract.CALL_ID_KEY: "c1"}]
    assert "todo_write's span could not be recorded" in caplog.text
    assert trace.get_current_span() is trace.INVALID_SPAN  # no context left attached


def test_a_tracer_that_raises_on_a_refused_call_still_refuses(
    caplog: pytest.LogCaptureFixture,
) -> None:
    instrumentation = instrument(tracer_provider=raising_provider("end"))
    session = MemorySession()
    tool = todo_write_tool(allow_parallel_in_progress=False)
    try:
        assert tool.call({}, session).startswith("Error")
        with pytest.raises(ToolCallRejected):
            tool.execute({}, Exec(session))
    finally:
        instrumentation.uninstrument()
    assert session.events == []


def distribution_of(module: str) -> str:
    """The distribution that installed ``module``'s file (a namespace package has several)."""
    spec = importlib.util.find_spec(module)
    assert spec is not None, module
    assert spec.origin is not None, module
    path = Path(spec.origin).resolve()
    for name in importlib.metadata.packages_distributions().get(module.split(".")[0], []):
        files = importlib.metadata.distribution(name).files or []
        if any(Path(str(file.locate())).resolve() == path for file in files):
            return name.lower()
    return "dsh-tool-todo"  # the checkout itself, installed editable


def test_the_docs_example_names_every_package_beyond_the_otel_extra() -> None:
    """docs/otel.md's example, run as printed after ``pip install '.[otel]'``, must not meet a
    missing module: whatever it imports beyond the extra, the page says to install."""
    root = Path(__file__).resolve().parents[2]
    page = (root / "docs" / "otel.md").read_text(encoding="utf-8")
    pyproject = (root / "pyproject.toml").read_text(encoding="utf-8")
    (extra,) = re.findall(r"^otel = \[(.*)\]$", pyproject, re.M)
    given = {
        re.split(r"[<>=!~ ;]", item.strip().strip('"'))[0].lower() for item in extra.split(",")
    }
    installs = " ".join(re.findall(r"pip install [^`\n]*", page)).lower()
    code = "\n".join(re.findall(r"^```python\n(.*?)^```", page, re.S | re.M))
    needed = {
        distribution_of(module) for module in re.findall(r"^(?:from|import) ([\w.]+)", code, re.M)
    }
    missing = {name for name in needed - given - {"dsh-tool-todo"} if name not in installs}
    assert missing == set(), f"docs/otel.md's example needs {missing}: say to pip install them"
