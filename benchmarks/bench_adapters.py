"""The adapters' per-call overhead: each framework's path with our tool vs a no-op tool.

- MCP over stdio: `dsh-todo mcp` against `mcp_noop_server.py` (the same SDK,
  low-level server, transport and tool definition; a call that does nothing),
  each a subprocess driven by the official client, one call at a time, in
  interleaved rounds. Goal: at most 1.1x.
- OpenAI Agents SDK: a whole `Runner.run` turn with the SDK's scripted model
  (one tool call, then a final message) with our `FunctionTool` vs a no-op
  `FunctionTool` of the same schema; and the bare `on_invoke_tool` of each.
- LlamaIndex: a whole `FunctionAgent.run` (its own `MockFunctionCallingLLM`, one
  tool call, then a final message) with our tool vs a no-op `FunctionTool` with
  the same metadata; and the bare `acall` of each.
- Google ADK (Python 3.11+): a whole `InMemoryRunner.run_async` turn with a
  scripted `BaseLlm` with our `BaseTool` vs a no-op `BaseTool` with the same
  declaration; and the bare `run_async` of each.
- CrewAI (its own section, "adapters: CrewAI per call": dev does not install
  crewai, so run it where it is, e.g. `.venv-crewai/bin/python benchmarks/run.py
  --only "adapters: CrewAI"`; skipped where it is missing): a whole
  `Crew.kickoff` with a scripted `BaseLLM` (one tool call, then a final text)
  with our `BaseTool` vs a no-op `BaseTool` with the same name, description and
  `args_schema`; and the bare `BaseTool.run` of each.

Run alone: python benchmarks/run.py --only adapters [--quick]
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import warnings
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from report import Row, fmt_ns, not_installed, skipped, unless_missing
from timing import quiet_gc, spread
from workloads import real_todos

HERE = Path(__file__).resolve().parent
MCP_TARGET = 1.1  # the goal for every adapter's whole turn
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
            # in memory, as it measured before `dsh-todo mcp` recorded to the default place
            ours = await _mcp_client(
                stack, [sys.executable, "-m", "dsh_tool_todo", "mcp", "--in-memory"]
            )
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


def _pair_rows(
    group: str, cases: list[tuple[str, dict[str, Any]]], ours: str, noop: str
) -> list[Row]:
    rows = []
    for n, (case, result) in enumerate(cases):
        ours_ns, ratio = result["ours"]
        noop_ns, _ = result["noop"]
        whole = n == 0  # the goal is for a whole agent turn; the bare call shows where it goes
        added = ours_ns - noop_ns
        sign = "+" if added >= 0 else "-"  # within noise, ours can come out faster
        rows.append(
            Row(
                f"adapters: {group}",
                f"6 items, {case}",
                f"{ours} {fmt_ns(ours_ns)}",
                f"{noop} {fmt_ns(noop_ns)}",
                ratio.median,
                target=f"≤{MCP_TARGET}x" if whole else "",
                met=ratio.median <= MCP_TARGET if whole else None,
                note=f"middle half of rounds {ratio.text()}; {sign}{fmt_ns(abs(added))} a call",
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


def llama_index_rows(seconds: float, batch: int) -> list[Row]:
    import warnings

    from llama_index.core.agent.workflow import FunctionAgent
    from llama_index.core.base.llms.types import ToolCallBlock
    from llama_index.core.llms import ChatMessage
    from llama_index.core.llms.mock import MockFunctionCallingLLM
    from llama_index.core.tools import FunctionTool

    from dsh_tool_todo.integrations.llama_index import TodoWriteMetadata, todo_write_llama_tool
    from dsh_tool_todo.stores.owners import OwnerRegistry

    # the framework's own pydantic deprecation warnings (its workflow inspects the agent)
    warnings.filterwarnings("ignore", "(The `__fields|Accessing the)", DeprecationWarning)
    owners = OwnerRegistry()
    ours = todo_write_llama_tool(allow_parallel_in_progress=False, owner="bench", owners=owners)
    answer = "Updated todo list: 0 pending, 0 in progress, 0 completed."

    async def nothing(**kwargs: Any) -> str:
        return answer

    metadata = TodoWriteMetadata(description=ours.metadata.description, name="todo_write")
    noop = FunctionTool(async_fn=nothing, metadata=metadata)

    def script(messages: Any, **kwargs: Any) -> ChatMessage:
        if any(message.role == "tool" for message in messages):
            return ChatMessage(role="assistant", content="ok")
        call = ToolCallBlock(tool_call_id="c", tool_name="todo_write", tool_kwargs=ARGS)
        return ChatMessage(role="assistant", blocks=[call])

    def turn(tool: Any) -> AsyncCall:
        agent = FunctionAgent(llm=MockFunctionCallingLLM(response_generator=script), tools=[tool])

        async def run() -> object:
            return await agent.run("plan")

        return run

    def invoke(tool: Any) -> AsyncCall:
        return lambda: tool.acall(**ARGS)

    async def measure() -> tuple[dict[str, Any], dict[str, Any]]:
        sides = {"ours": turn(ours), "noop": turn(noop)}
        turns = await _rounds(sides, reference="noop", seconds=seconds, batch=batch)
        owners.session("bench").events.clear()  # type: ignore[attr-defined]
        sides = {"ours": invoke(ours), "noop": invoke(noop)}
        bare = await _rounds(sides, reference="noop", seconds=seconds, batch=batch * 50)
        return turns, bare

    turns, bare = asyncio.run(measure())
    cases = [("FunctionAgent.run, one tool call", turns), ("acall alone", bare)]
    return _pair_rows("LlamaIndex", cases, "todo_write tool", "no-op FunctionTool")


def google_adk_rows(seconds: float, batch: int) -> list[Row]:
    if sys.version_info < (3, 11):
        return []  # google-adk 2.x needs Python 3.11+; its extra is marked so
    import logging
    from types import SimpleNamespace

    from google.adk.agents import LlmAgent
    from google.adk.models.base_llm import BaseLlm
    from google.adk.models.llm_response import LlmResponse
    from google.adk.runners import InMemoryRunner
    from google.adk.tools.base_tool import BaseTool
    from google.genai import types

    from dsh_tool_todo.integrations.google_adk import TodoWriteAdkTool
    from dsh_tool_todo.stores.owners import OwnerRegistry

    logging.getLogger("google_adk").setLevel(logging.ERROR)  # a line per turn on stderr
    owners = OwnerRegistry()
    ours = TodoWriteAdkTool(allow_parallel_in_progress=False, owner="bench", owners=owners)
    answer = {"result": "Updated todo list: 0 pending, 0 in progress, 0 completed."}

    class Noop(BaseTool):
        def _get_declaration(self) -> Any:
            return ours._get_declaration()

        async def run_async(self, *, args: Any, tool_context: Any) -> Any:
            return answer

    noop = Noop(name=ours.name, description=ours.description)

    class Scripted(BaseLlm):
        async def generate_content_async(self, llm_request: Any, stream: bool = False) -> Any:
            done = any(p.function_response for c in llm_request.contents for p in c.parts or [])
            call = types.FunctionCall(id="c", name="todo_write", args=ARGS)
            part = types.Part(text="ok") if done else types.Part(function_call=call)
            yield LlmResponse(content=types.Content(role="model", parts=[part]))

    message = types.Content(role="user", parts=[types.Part(text="plan")])

    def turn(tool: Any) -> AsyncCall:
        agent = LlmAgent(name="bench", model=Scripted(model="scripted"), tools=[tool])
        runner = InMemoryRunner(agent=agent, app_name="bench")

        async def run() -> object:
            service = runner.session_service
            session = await service.create_session(app_name="bench", user_id="u")
            async for _ in runner.run_async(
                user_id="u", session_id=session.id, new_message=message
            ):
                pass
            return None

        return run

    context: Any = SimpleNamespace(function_call_id=None)  # all a fixed-owner call reads

    def invoke(tool: Any) -> AsyncCall:
        return lambda: tool.run_async(args=ARGS, tool_context=context)

    async def measure() -> tuple[dict[str, Any], dict[str, Any]]:
        sides = {"ours": turn(ours), "noop": turn(noop)}
        turns = await _rounds(sides, reference="noop", seconds=seconds, batch=batch)
        owners.session("bench").events.clear()  # type: ignore[attr-defined]
        sides = {"ours": invoke(ours), "noop": invoke(noop)}
        bare = await _rounds(sides, reference="noop", seconds=seconds, batch=batch * 50)
        return turns, bare

    turns, bare = asyncio.run(measure())
    cases = [("InMemoryRunner.run_async, one tool call", turns), ("run_async alone", bare)]
    return _pair_rows("Google ADK", cases, "TodoWriteAdkTool", "no-op BaseTool")


def crewai_rows(seconds: float, batch: int) -> list[Row]:
    import logging

    group = "adapters: CrewAI"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # crewai.rag's ImportWarning
            from crewai import Agent, Crew, Task
            from crewai.llms.base_llm import BaseLLM
            from crewai.tools import BaseTool
    except ImportError as error:  # not in dev (crewai needs openai<3): .ci/run's .venv-crewai
        return [skipped(group, "6 items", not_installed(error) or str(error))]
    os.environ.setdefault("CREWAI_DISABLE_TELEMETRY", "true")
    os.environ.setdefault("OTEL_SDK_DISABLED", "true")
    warnings.filterwarnings("ignore", category=DeprecationWarning, module="crewai")
    warnings.filterwarnings("ignore", "function_calling_llm is deprecated", DeprecationWarning)
    logging.getLogger("crewai").setLevel(logging.ERROR)  # a token-count notice per request

    from dsh_tool_todo.integrations.crewai import TodoWriteArguments, TodoWriteCrewTool
    from dsh_tool_todo.stores.owners import OwnerRegistry

    owners = OwnerRegistry()
    ours = TodoWriteCrewTool(allow_parallel_in_progress=False, owner="bench", owners=owners)
    answer = "Updated todo list: 0 pending, 0 in progress, 0 completed."

    class Noop(BaseTool):
        def _run(self, **kwargs: Any) -> str:
            return answer

    noop = Noop(name=ours.name, description=ours.description, args_schema=TodoWriteArguments)
    tool_call = {
        "id": "c",
        "type": "function",
        "function": {"name": "todo_write", "arguments": RAW},
    }

    class Scripted(BaseLLM):
        def call(self, messages: Any, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
            return "ok" if any(m["role"] == "tool" for m in messages) else [tool_call]

        def supports_function_calling(self) -> bool:
            return True

        def get_context_window_size(self) -> int:
            return 100_000

    def turn(tool: Any) -> AsyncCall:
        agent = Agent(
            role="bench", goal="plan", backstory="b", llm=Scripted(model="s"), tools=[tool]
        )
        crew = Crew(
            agents=[agent], tasks=[Task(description="plan", expected_output="ok", agent=agent)]
        )

        async def run() -> object:
            return await crew.kickoff_async()

        return run

    def invoke(tool: Any) -> AsyncCall:
        async def run() -> object:
            return tool.run(**ARGS)

        return run

    async def measure() -> tuple[dict[str, Any], dict[str, Any]]:
        sides = {"ours": turn(ours), "noop": turn(noop)}
        turns = await _rounds(sides, reference="noop", seconds=seconds, batch=batch)
        owners.session("bench").events.clear()  # type: ignore[attr-defined]
        sides = {"ours": invoke(ours), "noop": invoke(noop)}
        bare = await _rounds(sides, reference="noop", seconds=seconds, batch=batch * 50)
        return turns, bare

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        turns, bare = asyncio.run(measure())
    cases = [("Crew.kickoff_async, one tool call", turns), ("BaseTool.run alone", bare)]
    return _pair_rows("CrewAI", cases, "TodoWriteCrewTool", "no-op BaseTool")


def rows(seconds: float, *, quick: bool) -> list[Row]:
    # each framework on its own: one not installed is a skipped row, and the others still run
    batch = 5 if quick else 20
    frameworks: list[tuple[str, Callable[[], list[Row]]]] = [
        ("MCP over stdio", lambda: mcp_rows(seconds, batch=20 if quick else 100)),
        ("OpenAI Agents SDK", lambda: openai_agents_rows(seconds, batch)),
        ("LlamaIndex", lambda: llama_index_rows(seconds, batch)),
        ("Google ADK", lambda: google_adk_rows(seconds, batch)),
    ]
    return [
        row
        for group, run in frameworks
        for row in unless_missing(f"adapters: {group}", "6 items", run)
    ]
