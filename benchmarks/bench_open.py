"""Adapters that open a session per run: a new one's open and first call against a steady call.

Row 1's rule (what opening and a first call cost beside a steady call) taken
through the adapters that open their own sessions:

- LangChain per thread: a ``create_agent`` graph with ``TodoWriteMiddleware``
  and LangGraph's ``InMemorySaver``, driven by a scripted chat model that makes
  one ``todo_write`` call of a 6-item plan per run, then answers. *open + first*
  is a run on a thread id never used before (the checkpointer starts the
  thread); *steady* is a run on a thread that already holds one run. After each
  batch, untimed, the steady thread is deleted and primed again with one run and
  the new threads are deleted, so the steady thread never grows past two runs.
- MCP per server, in process (the SDK's in-memory transport, not stdio):
  *open + first* is ``build_server`` on a fresh in-memory ``OwnerRegistry``, the
  client connected and initialised, one ``tools/call`` and the connection
  closed; *steady* is one ``tools/call`` on a connection opened once.

The owner registry's rows (a new owner's open + first call + close against a
steady call of one owner) are in row 1, ``bench_session.owner_rows``.

Sides are interleaved in rounds; each ratio is the median of per-round ratios.

Run alone: python benchmarks/run.py --only "open + first" [--quick]
"""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from typing import Any

from report import Row, fmt_ns, skipped
from timing import Side, batched, interleaved
from workloads import real_todos

SECTION = "adapters: open + first call"
PLAN_SIZE = 6


def _rows_for(case: str, result: Any, open_label: str, note: str) -> Row:
    ratio = result.ratio("open+first", "steady")
    ns = result.per_call_ns
    return Row(
        SECTION,
        case,
        f"{open_label} {fmt_ns(ns['open+first'])}",
        f"a steady call {fmt_ns(ns['steady'])}",
        ratio.median,
        target="info",
        note=f"{note}; {result.rounds} rounds of {result.batch}; middle half {ratio.text()}",
        numbers=result.numbers("open+first", "steady"),
    )


# LangChain ---------------------------------------------------------------------------------


def _one_call_model() -> Any:
    """A chat model that makes one ``todo_write`` call per user turn, then answers."""
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
    from langchain_core.outputs import ChatGeneration, ChatResult

    plan = real_todos(PLAN_SIZE)

    class OneCall(BaseChatModel):  # type: ignore[misc]
        @property
        def _llm_type(self) -> str:
            return "one-call"

        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

        def _generate(
            self, messages: list[Any], stop: Any = None, run_manager: Any = None, **kwargs: Any
        ) -> Any:
            answered = False
            for message in reversed(messages):  # only this turn: back to the user's message
                if isinstance(message, HumanMessage):
                    break
                answered = answered or isinstance(message, ToolMessage)
            if answered:
                message = AIMessage(content="done")
            else:
                call = {"name": "todo_write", "args": {"todos": plan}, "id": f"c{len(messages)}"}
                message = AIMessage(content="", tool_calls=[call])
            return ChatResult(generations=[ChatGeneration(message=message)])

    return OneCall()


def langchain_rows(seconds: float) -> list[Row]:
    try:
        from langchain.agents import create_agent
        from langgraph.checkpoint.memory import InMemorySaver
    except ImportError:
        return [skipped(SECTION, "LangChain, per thread", "langchain not installed")]
    from dsh_tool_todo.integrations.langchain import TodoWriteMiddleware

    saver = InMemorySaver()
    agent = create_agent(
        _one_call_model(),
        middleware=[TodoWriteMiddleware(allow_parallel_in_progress=False)],
        checkpointer=saver,
    )
    request = {"messages": [{"role": "user", "content": "Plan the release"}]}
    fresh = (f"thread-{n}" for n in itertools.count())
    used: list[str] = []

    def config(thread: str) -> dict[str, Any]:
        return {"configurable": {"thread_id": thread}}

    def new_thread() -> object:
        thread = next(fresh)
        used.append(thread)
        return agent.invoke(request, config(thread))

    def steady() -> object:
        return agent.invoke(request, config("steady"))

    def reset() -> None:
        for thread in used:
            saver.delete_thread(thread)
        used.clear()
        saver.delete_thread("steady")
        agent.invoke(request, config("steady"))

    reset()
    final = steady()
    assert isinstance(final, dict)
    assert final["todos"] == real_todos(PLAN_SIZE), final.get("todos")
    assert len(final["messages"]) == 8, len(final["messages"])  # two runs of 4 messages
    result = interleaved(
        {"open+first": batched(new_thread), "steady": batched(steady)},
        reference="steady",
        seconds=seconds,
        reset=reset,
        warmup=3,
        batch=3,
    )
    return [
        _rows_for(
            "LangChain, per thread: a new thread id's first run",
            result,
            "new thread + first run",
            "one run = model turn, todo_write, model turn; InMemorySaver; "
            f"steady {fmt_ns(result.per_call_ns['steady'])} on a thread holding one run",
        )
    ]


# MCP ---------------------------------------------------------------------------------------


class _LoopThread:
    """An event loop on its own thread, so connections opened in one task stay in that task
    (anyio's task groups must be left by the task that entered them) while the sync timing
    harness drives batches; each batch times itself inside the loop."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()

    def run(self, coroutine: Awaitable[Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()  # type: ignore[arg-type]

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.close()


def _async_side(runner: _LoopThread, call: Callable[[], Awaitable[Any]]) -> Side:
    async def timed(n: int) -> float:
        start = time.perf_counter_ns()
        for _ in range(n):
            await call()
        return (time.perf_counter_ns() - start) / n

    return lambda n: runner.run(timed(n))


def mcp_rows(seconds: float) -> list[Row]:
    try:
        from mcp.shared.memory import create_connected_server_and_client_session

        from dsh_tool_todo.integrations.mcp import build_server
    except ImportError:
        return [skipped(SECTION, "MCP, per server", "mcp not installed (extra `mcp`)")]
    from dsh_tool_todo.stores.owners import OwnerRegistry

    arguments = {"todos": real_todos(PLAN_SIZE)}
    runner = _LoopThread()
    held: dict[str, Any] = {}
    stop = asyncio.Event()

    def server() -> Any:
        return build_server(allow_parallel_in_progress=False, owners=OwnerRegistry())

    async def hold(ready: asyncio.Future[None]) -> None:
        # The steady connection lives in this one task from open to close.
        async with create_connected_server_and_client_session(server()) as session:
            held["session"] = session
            ready.set_result(None)
            await stop.wait()

    async def start() -> asyncio.Task[None]:
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        task = asyncio.ensure_future(hold(ready))
        await ready
        return task

    async def open_first_close() -> Any:
        async with AsyncExitStack() as stack:
            session = await stack.enter_async_context(
                create_connected_server_and_client_session(server())
            )
            return await session.call_tool("todo_write", arguments)

    async def steady() -> Any:
        return await held["session"].call_tool("todo_write", arguments)

    async def finish(task: asyncio.Task[None]) -> None:
        stop.set()
        await task

    task = runner.run(start())
    try:
        for check in (open_first_close, steady):
            answer = runner.run(check())
            text = answer.content[0].text
            assert not answer.isError, text
            assert text.startswith("Updated todo list"), text
        result = interleaved(
            {
                "open+first": _async_side(runner, open_first_close),
                "steady": _async_side(runner, steady),
            },
            reference="steady",
            seconds=seconds,
            warmup=10,
        )
    finally:
        runner.run(finish(task))
        runner.close()
    return [
        _rows_for(
            "MCP in process, per server: a new server's first call",
            result,
            "build_server + connect + initialize + first call + close",
            f"in-memory transport; steady {fmt_ns(result.per_call_ns['steady'])} "
            f"(todo_write of {PLAN_SIZE} items, {len(json.dumps(arguments))} bytes)",
        )
    ]


def rows(seconds: float) -> list[Row]:
    return [*langchain_rows(seconds), *mcp_rows(seconds)]
