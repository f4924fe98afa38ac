"""The adapters' per-call overhead: each framework's path with our tool vs a no-op tool.

- MCP over stdio: `dsh-todo mcp` against `mcp_noop_server.py` (the same SDK,
  low-level server, transport and tool definition; a call that does nothing),
  each a subprocess driven by the official client, one call at a time, in
  interleaved rounds. Goal: at most 1.1x.
- OpenAI Agents SDK: a whole `Runner.run` turn with the SDK's scripted model
  (one tool call, then a final message) with our `FunctionTool` vs a no-op
  `FunctionTool` of the same schema; and the bare `on_invoke_tool` of each.

Run alone: python benchmarks/run.py --only adapters [--quick]
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from report import Row, fmt_ns
from timing import quiet_gc, spread
from workloads import real_todos

HERE = Path(__file__).resolve().parent
MCP_TARGET = 1.1
ARGS = {"todos": real_todos(6)}
RAW = json.dumps(ARGS)
AsyncCall = Callable[[], Awaitable[object]]


async def _rounds(
    sides: dict[str, AsyncCall], *, reference: str, seconds: float, batch: int, min_rounds: int = 7
) -> dict[str, Any]:
    """Interleaved rounds of ``batch`` sequential awaited calls per side; medians and ratios."""
    names = list(sides)
    for name in names:  # warm-up
        for _ in range(batch):
            await sides[name]()
    samples: dict[str, list[float]] = {name: [] for name in names}
    deadline = time.perf_counter() + seconds
    rounds = 0
    with quiet_gc():
        while rounds < min_rounds or time.perf_counter() < deadline:
            order = names[rounds % len(names) :] + names[: rounds % len(names)]
            for name in order:
                call = sides[name]
                start = time.perf_counter_ns()
                for _ in range(batch):
                    await call()
                samples[name].append((time.perf_counter_ns() - start) / batch)
            rounds += 1
    result: dict[str, Any] = {"rounds": rounds, "batch": batch, "samples": samples}
    for name in names:
        ratios = [mine / ref for mine, ref in zip(samples[name], samples[reference], strict=True)]
        result[name] = (sorted(samples[name])[len(samples[name]) // 2], spread(ratios))
    return result


async def _mcp_client(stack: AsyncExitStack, command: list[str]) -> Any:
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    parameters = StdioServerParameters(command=command[0], args=command[1:])
    read, write = await stack.enter_async_context(stdio_client(parameters))
    session = await stack.enter_async_context(ClientSession(read, write))
    await session.initialize()
    return session


def mcp_rows(seconds: float, batch: int) -> list[Row]:
    async def measure() -> dict[str, Any]:
        async with AsyncExitStack() as stack:
            ours = await _mcp_client(stack, [sys.executable, "-m", "dsh_tool_todo", "mcp"])
            noop = await _mcp_client(stack, [sys.executable, str(HERE / "mcp_noop_server.py")])
            answer = await ours.call_tool("todo_write", ARGS)
            assert answer.content[0].text.startswith("Updated todo list"), answer
            return await _rounds(
                {
                    "ours": lambda: ours.call_tool("todo_write", ARGS),
                    "noop": lambda: noop.call_tool("todo_write", ARGS),
                },
                reference="noop",
                seconds=seconds,
                batch=batch,
            )

    result = asyncio.run(measure())
    ours_ns, ratio = result["ours"]
    noop_ns, _ = result["noop"]
    return [
        Row(
            "adapters: MCP over stdio",
            "6 items, one call at a time",
            f"dsh-todo mcp {fmt_ns(ours_ns)}",
            f"no-op tool, same server {fmt_ns(noop_ns)}",
            ratio.median,
            target=f"≤{MCP_TARGET}x",
            met=ratio.median <= MCP_TARGET,
            note=f"middle half of rounds {ratio.text()}",
            numbers={
                "ns": ours_ns,
                "reference_ns": noop_ns,
                "ratio_p25": ratio.low,
                "ratio_p75": ratio.high,
                "rounds": result["rounds"],
                "batch": result["batch"],
            },
        )
    ]


def openai_agents_rows(seconds: float, batch: int) -> list[Row]:
    from agents import Agent, RunConfig, Runner
    from agents.testing import ScriptedModel, assistant_message, function_call
    from agents.tool import FunctionTool
    from agents.tool_context import ToolContext

    from dsh_tool_todo.integrations.openai_agents import todo_write_function_tool
    from dsh_tool_todo.stores.owners import OwnerRegistry

    owners = OwnerRegistry()
    ours = todo_write_function_tool(allow_parallel_in_progress=False, owner="bench", owners=owners)
    answer = "Updated todo list: 0 pending, 0 in progress, 0 completed."

    async def nothing(ctx: Any, arguments: str) -> str:
        return answer

    noop = FunctionTool(
        name=ours.name,
        description=ours.description,
        params_json_schema=dict(ours.params_json_schema),
        on_invoke_tool=nothing,
    )
    config = RunConfig(tracing_disabled=True)

    def turn(tool: FunctionTool) -> AsyncCall:
        async def run() -> object:
            model = ScriptedModel(
                [[function_call("todo_write", RAW, call_id="c")], [assistant_message("ok")]]
            )
            agent = Agent(name="bench", model=model, tools=[tool])
            return await Runner.run(agent, "plan", run_config=config)

        return run

    context = ToolContext(
        context=None, tool_name="todo_write", tool_call_id="c", tool_arguments=RAW
    )

    def invoke(tool: FunctionTool) -> AsyncCall:
        return lambda: tool.on_invoke_tool(context, RAW)

    async def measure() -> tuple[dict[str, Any], dict[str, Any]]:
        turns = await _rounds(
            {"ours": turn(ours), "noop": turn(noop)},
            reference="noop",
            seconds=seconds,
            batch=batch,
        )
        owners.session("bench").events.clear()  # type: ignore[attr-defined]
        bare = await _rounds(
            {"ours": invoke(ours), "noop": invoke(noop)},
            reference="noop",
            seconds=seconds,
            batch=batch * 50,
        )
        return turns, bare

    turns, bare = asyncio.run(measure())
    rows = []
    for case, result in (("Runner.run, one tool call", turns), ("on_invoke_tool alone", bare)):
        ours_ns, ratio = result["ours"]
        noop_ns, _ = result["noop"]
        rows.append(
            Row(
                "adapters: OpenAI Agents SDK",
                f"6 items, {case}",
                f"todo_write FunctionTool {fmt_ns(ours_ns)}",
                f"no-op FunctionTool {fmt_ns(noop_ns)}",
                ratio.median,
                note=f"middle half of rounds {ratio.text()}; +{fmt_ns(ours_ns - noop_ns)} a call",
                numbers={
                    "ns": ours_ns,
                    "reference_ns": noop_ns,
                    "ratio_p25": ratio.low,
                    "ratio_p75": ratio.high,
                    "rounds": result["rounds"],
                    "batch": result["batch"],
                },
            )
        )
    return rows


def rows(seconds: float, *, quick: bool) -> list[Row]:
    return [
        *mcp_rows(seconds, batch=20 if quick else 100),
        *openai_agents_rows(seconds, batch=5 if quick else 20),
    ]
