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
import os
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
    sides: dict[str, AsyncCall],
    *,
    reference: str,
    seconds: float,
    batch: int,
    min_rounds: int = 7,
    started: Callable[[], object] = lambda: None,
) -> dict[str, Any]:
    """Interleaved rounds of ``batch`` sequential awaited calls per side; medians and ratios.

    ``started`` runs once after the warm-up, just before the timed rounds.
    """
    names = list(sides)
    for name in names:  # warm-up
        for _ in range(batch):
            await sides[name]()
    started()
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


def _server_cpu_seconds() -> dict[str, float]:
    """CPU time (user + system) each server subprocess of this process has used, from /proc.

    Unlike wall time, it hardly grows when other work crowds the machine's cores.
    """
    ticks = os.sysconf("SC_CLK_TCK")
    found: dict[str, float] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) != os.getpid():
                continue
            command = (stat.parent / "cmdline").read_bytes()
        except (OSError, IndexError, ValueError):
            continue  # gone, or not ours
        side = "ours" if b"dsh_tool_todo" in command else "noop" if b"noop" in command else None
        if side is not None:
            found[side] = (int(fields[11]) + int(fields[12])) / ticks
    return found


def mcp_rows(seconds: float, batch: int) -> list[Row]:
    cpu: dict[str, dict[str, float]] = {}

    async def measure() -> dict[str, Any]:
        async with AsyncExitStack() as stack:
            ours = await _mcp_client(stack, [sys.executable, "-m", "dsh_tool_todo", "mcp"])
            noop = await _mcp_client(stack, [sys.executable, str(HERE / "mcp_noop_server.py")])
            answer = await ours.call_tool("todo_write", ARGS)
            assert answer.content[0].text.startswith("Updated todo list"), answer
            result = await _rounds(
                {
                    "ours": lambda: ours.call_tool("todo_write", ARGS),
                    "noop": lambda: noop.call_tool("todo_write", ARGS),
                },
                reference="noop",
                seconds=seconds,
                batch=batch,
                started=lambda: cpu.update(before=_server_cpu_seconds()),
            )
            cpu["after"] = _server_cpu_seconds()
            return result

    result = asyncio.run(measure())
    ours_ns, ratio = result["ours"]
    noop_ns, _ = result["noop"]
    calls = result["rounds"] * result["batch"]
    used = {
        side: (cpu["after"][side] - cpu["before"][side]) / calls * 1e9
        for side in ("ours", "noop")
        if side in cpu["before"] and side in cpu["after"]
    }
    cpu_rows = []
    if len(used) == 2 and used["noop"] > 0:
        cpu_rows.append(
            Row(
                "adapters: MCP over stdio",
                "6 items, server CPU per call",
                f"dsh-todo mcp {fmt_ns(used['ours'])}",
                f"no-op tool, same server {fmt_ns(used['noop'])}",
                used["ours"] / used["noop"],
                note=f"user + system time of each server process over {calls:,} calls (/proc)",
                numbers={"ns": used["ours"], "reference_ns": used["noop"], "calls": calls},
            )
        )
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
        ),
        *cpu_rows,
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
