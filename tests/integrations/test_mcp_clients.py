"""`dsh-todo mcp` through a framework's own MCP client: LangChain's MCP adapter, over stdio.

Kept apart from test_mcp.py, which also runs in CI's small mcp 2.x environment
where LangChain's adapter (it needs mcp 1.x) is not installed.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_mcp_adapters.client import MultiServerMCPClient
from langchain_mcp_adapters.tools import load_mcp_tools

from dsh_tool_todo import todo_write_tool
from dsh_tool_todo.core import contract
from dsh_tool_todo.core.schema import parameters
from dsh_tool_todo.stores.jsonl import current_plan, read_events
from dsh_tool_todo.stores.owners import OwnerRegistry, owner_file_name
from tests.integrations.scripted_langchain import ScriptedChatModel

DSH_TODO = str(Path(sys.executable).parent / "dsh-todo")
PLAN = {"todos": [{"content": "Wire the MCP server", "status": "in_progress"}]}


def test_langchains_mcp_client_sees_our_tool_and_our_texts(tmp_path: Path) -> None:
    args = ["mcp", "--log-dir", str(tmp_path), "--owner", "lc"]
    client = MultiServerMCPClient(
        {"todo": {"command": DSH_TODO, "args": args, "transport": "stdio"}}
    )

    async def run() -> tuple[Any, list[Any]]:
        async with client.session("todo") as session:
            (tool,) = await load_mcp_tools(session)
            messages = [
                await tool.ainvoke(
                    {"type": "tool_call", "id": str(n), "name": "todo_write", "args": call}
                )
                for n, call in enumerate([{**PLAN, "merge": True}, PLAN])
            ]
            return tool, messages

    tool, (refused, recorded) = asyncio.run(run())
    assert tool.name == "todo_write"
    assert tool.description == contract.DESCRIPTION_SINGLE
    assert tool.args_schema == parameters()
    expected = todo_write_tool(allow_parallel_in_progress=False).call(
        {**PLAN, "merge": True}, OwnerRegistry().session("x")
    )
    assert refused.status == "error"
    assert [block["text"] for block in refused.content] == [expected]
    assert recorded.status == "success"
    assert [block["text"] for block in recorded.content] == [
        "Updated todo list: 0 pending, 1 in progress, 0 completed."
    ]
    assert current_plan(tmp_path / owner_file_name("lc")) == PLAN["todos"]


def test_per_call_mode_on_a_durable_owner_answers_every_call_of_a_turn(tmp_path: Path) -> None:
    """`get_tools()` without a session starts one `dsh-todo mcp` per call: four calls in one
    model turn are four servers at once on one owner, which wait for it in turn."""
    args = ["mcp", "--log-dir", str(tmp_path), "--owner", "per-call"]
    client = MultiServerMCPClient(
        {"todo": {"command": DSH_TODO, "args": args, "transport": "stdio"}}
    )
    rounds, calls = 3, 4
    plans = {
        (r, c): {"todos": [{"content": f"round {r} call {c}", "status": "pending"}]}
        for r in range(rounds)
        for c in range(calls)
    }

    def turn(r: int) -> AIMessage:
        return AIMessage(
            content="",
            tool_calls=[
                {"name": "todo_write", "args": plans[r, c], "id": f"r{r}c{c}", "type": "tool_call"}
                for c in range(calls)
            ],
        )

    async def run() -> list[ToolMessage]:
        tools = await client.get_tools()
        answered: list[ToolMessage] = []
        for r in range(rounds):
            model = ScriptedChatModel(script=[turn(r), AIMessage("noted")])
            agent = create_agent(model, tools=tools)
            state = await agent.ainvoke({"messages": [HumanMessage(f"round {r}")]})
            answered += [m for m in state["messages"] if isinstance(m, ToolMessage)]
        return answered

    answered = asyncio.run(run())
    assert len(answered) == rounds * calls
    assert {m.status for m in answered} == {"success"}
    texts = {m.text if isinstance(m.text, str) else m.text() for m in answered}
    assert texts == {"Updated todo list: 1 pending, 0 in progress, 0 completed."}
    recorded = [event["data"] for event in read_events(tmp_path / owner_file_name("per-call"))]
    assert sorted(map(str, recorded)) == sorted(map(str, plans.values()))  # nothing lost
