"""Every adapter against the one adapter contract (tests/integrations/adapter_contract.py).

A driver per framework: what the framework offers the model, and one model
turn through its own loop with a scripted model. LangChain records into the
graph state, not a session, so its checks are in test_langchain.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import mcp
import pytest
from agents import Agent as OpenAIAgent
from agents import RunConfig, Runner
from agents.testing import ScriptedModel, assistant_message, function_call
from pydantic_ai import Agent
from pydantic_ai.models.function import FunctionModel

from dsh_tool_todo.integrations.mcp import build_server
from dsh_tool_todo.integrations.openai_agents import todo_write_function_tool
from dsh_tool_todo.integrations.pydantic_ai import todo_write_toolset
from dsh_tool_todo.stores.owners import OwnerRegistry
from tests.integrations.adapter_contract import (
    CHECKS,
    Driver,
    RecordingSession,
    Reply,
    Unopenable,
    opener,
)
from tests.integrations.scripted_pydantic_ai import Script


def registry_of(session: Any) -> OwnerRegistry:
    """A registry whose every owner is ``session``: the adapter's own serialisation is tested.
    An ``Unopenable`` one is a registry whose store cannot open any owner's session."""
    return OwnerRegistry(open_session=opener(session))


class OpenAIAgentsDriver:
    call_ids = True

    def _run(self, tool: Any, calls: Sequence[tuple[str, Any]]) -> ScriptedModel:
        script: list[list[Any]] = [[assistant_message("done")]]
        if calls:
            made = [function_call("todo_write", dict(args), call_id=cid) for cid, args in calls]
            script.insert(0, made)
        model = ScriptedModel(script)
        agent = OpenAIAgent(name="planner", model=model, tools=[tool])
        config = RunConfig(tracing_disabled=True)
        asyncio.run(Runner.run(agent, "plan it", run_config=config))
        model.assert_complete()
        return model

    def offered(self, *, parallel: bool) -> tuple[str, str, Mapping[str, Any]]:
        tool = todo_write_function_tool(allow_parallel_in_progress=parallel, owner="me")
        (offered,) = self._run(tool, []).calls[0].tools
        return offered.name, offered.description, offered.params_json_schema

    def turn(self, calls: Sequence[tuple[str, Any]], session: Any) -> list[Reply]:
        tool = todo_write_function_tool(
            allow_parallel_in_progress=False, owner="me", owners=registry_of(session)
        )
        model = self._run(tool, calls)
        outputs = {
            item["call_id"]: item["output"]
            for item in model.calls[-1].input
            if item.get("type") == "function_call_output"
        }
        return [Reply(outputs[cid], None) for cid, _ in calls]  # the SDK has no error flag


class PydanticAIDriver:
    call_ids = True

    def _run(
        self, calls: Sequence[tuple[str, Any]], deps: Any, parallel: bool, **options: Any
    ) -> Script:
        script = Script(*(args for _, args in calls), ids=[cid for cid, _ in calls])
        toolset = todo_write_toolset(allow_parallel_in_progress=parallel, **options)
        asyncio.run(Agent(FunctionModel(script), toolsets=[toolset]).run("plan it", deps=deps))
        return script

    def offered(self, *, parallel: bool) -> tuple[str, str, Mapping[str, Any]]:
        (definition,) = self._run([], None, parallel).infos[0].function_tools
        return definition.name, definition.description or "", definition.parameters_json_schema

    def turn(self, calls: Sequence[tuple[str, Any]], session: Any) -> list[Reply]:
        if isinstance(session, Unopenable):  # the owner "me" of a registry that cannot open it
            script = self._run(calls, "me", False, owners=registry_of(session))
        else:
            script = self._run(calls, session, False)
        returned = {part.tool_call_id: part for part in script.returns()}
        return [
            Reply(str(returned[cid].content), returned[cid].outcome == "failed") for cid, _ in calls
        ]


@asynccontextmanager
async def _connected(server: Any) -> AsyncIterator[Any]:
    if hasattr(mcp, "Client"):  # 2.x
        async with mcp.Client(server) as client:
            yield client
    else:
        from mcp.shared.memory import create_connected_server_and_client_session

        async with create_connected_server_and_client_session(server) as client:
            yield client


class MCPDriver:
    call_ids = False  # JSON-RPC request ids restart per connection: none is recorded

    def offered(self, *, parallel: bool) -> tuple[str, str, Mapping[str, Any]]:
        async def listed() -> Any:
            async with _connected(build_server(allow_parallel_in_progress=parallel)) as client:
                return await client.list_tools()

        (tool,) = asyncio.run(listed()).tools
        return tool.name, tool.description, tool.inputSchema

    def turn(self, calls: Sequence[tuple[str, Any]], session: Any) -> list[Reply]:
        server = build_server(allow_parallel_in_progress=False, owners=registry_of(session))

        async def run() -> list[Any]:
            async with _connected(server) as client:  # the client sends them all at once
                return list(
                    await asyncio.gather(*(client.call_tool("todo_write", a) for _, a in calls))
                )

        return [Reply(result.content[0].text, result.isError) for result in asyncio.run(run())]


pytestmark = pytest.mark.usefixtures("no_model_requests")

DRIVERS: dict[str, Driver] = {
    "openai_agents": OpenAIAgentsDriver(),
    "pydantic_ai": PydanticAIDriver(),
    "mcp": MCPDriver(),
}
CASES = [
    pytest.param(driver, check, id=f"{name}-{check_name}")
    for name, driver in DRIVERS.items()
    for check_name, check in CHECKS.items()
    if driver.call_ids or check_name != "repeated_call_id"
]


@pytest.mark.parametrize(("driver", "check"), CASES)
def test_adapter_contract(driver: Driver, check: Any) -> None:
    check(driver)


def test_an_empty_framework_call_id_records_no_id_and_the_call_is_answered() -> None:
    from agents.tool_context import ToolContext

    session = RecordingSession()
    tool = todo_write_function_tool(
        allow_parallel_in_progress=False, owner="me", owners=registry_of(session)
    )
    raw = '{"todos": [{"content": "Read the code", "status": "in_progress"}]}'
    context = ToolContext(context=None, tool_name="todo_write", tool_call_id="", tool_arguments=raw)
    text = asyncio.run(tool.on_invoke_tool(context, raw))
    assert text == "Updated todo list: 0 pending, 1 in progress, 0 completed."
    assert session.data == [{"todos": [{"content": "Read the code", "status": "in_progress"}]}]
