"""The README's lines for LangChain, pydantic-ai and the OpenAI Agents SDK run as printed.

The lines name ``model``, ``prompt``, ``session``, ``owners`` and ``user_id`` as the README's
note under the table defines them; here ``model`` is each framework's scripted test model.
Both READMEs carry the same lines.
"""

from __future__ import annotations

import ast
import asyncio
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from agents import RunConfig, Runner
from agents.testing import ScriptedModel, assistant_message, function_call
from langchain_core.messages import AIMessage
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import FunctionModel

from dsh_tool_todo.core.contract import EVENT_TYPE
from dsh_tool_todo.stores.memory import MemorySession
from dsh_tool_todo.stores.owners import OwnerRegistry
from tests.integrations.scripted_langchain import ScriptedChatModel, tool_calls

ROOT = Path(__file__).resolve().parents[2]
PLAN = [{"content": "Read the failing test", "status": "in_progress"}]


def lines(readme: str, framework: str) -> str:
    text = (ROOT / readme).read_text(encoding="utf-8")
    (row,) = [line for line in text.splitlines() if line.startswith(f"| {framework} ")]
    cell = row.split(" | ")[2]
    return "\n".join(re.findall(r"`([^`]+)`", cell.replace("<br>", "\n")))


@pytest.mark.parametrize("readme", ["README.md", "README.zh.md"])
def test_the_langchain_lines(readme: str) -> None:
    namespace: dict[str, Any] = {
        "model": ScriptedChatModel(
            script=[tool_calls(("todo_write", {"todos": PLAN})), AIMessage("On it.")]
        ),
    }
    exec("from langchain.agents import create_agent\n" + lines(readme, "LangChain v1"), namespace)
    state = namespace["agent"].invoke({"messages": [{"role": "user", "content": "Fix it"}]})
    assert state["todos"] == PLAN


@pytest.mark.parametrize("readme", ["README.md", "README.zh.md"])
def test_the_pydantic_ai_lines(readme: str) -> None:
    def scripted(messages: Any, info: Any) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart("todo_write", {"todos": PLAN})])
        return ModelResponse(parts=[TextPart("On it.")])

    session = MemorySession()
    namespace = {"model": FunctionModel(scripted), "prompt": "Fix it", "session": session}

    source = "from pydantic_ai import Agent\n" + lines(readme, "pydantic-ai")
    code = compile(source, readme, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    asyncio.run(eval(code, namespace))  # the line awaits, as in an async function
    assert [event["data"]["todos"] for event in session.events] == [PLAN]


@pytest.mark.parametrize("readme", ["README.md", "README.zh.md"])
def test_the_openai_agents_lines(readme: str) -> None:
    owners = OwnerRegistry()
    model = ScriptedModel(
        [
            [function_call("todo_write", {"todos": PLAN}, call_id="c1")],
            [assistant_message("On it.")],
        ]
    )
    namespace: dict[str, Any] = {"owners": owners}
    exec("from agents import Agent\n" + lines(readme, "OpenAI Agents SDK"), namespace)
    agent = namespace["agent"].clone(model=model)
    config = RunConfig(tracing_disabled=True)
    asyncio.run(Runner.run(agent, "Fix it", context={"user": "ada"}, run_config=config))
    written = owners.session("ada").latest([EVENT_TYPE])
    assert written is not None
    assert written["data"] == {"todos": PLAN, "callId": "c1"}


@pytest.mark.parametrize("readme", ["README.md", "README.zh.md"])
@pytest.mark.skipif(sys.version_info < (3, 11), reason="dev installs it on Python 3.11+")
def test_the_strands_lines(readme: str) -> None:
    from tests.integrations.scripted_strands import ScriptedModel as StrandsModel

    owners = OwnerRegistry()
    model = StrandsModel([[("t1", {"todos": PLAN})], "On it."])
    namespace: dict[str, Any] = {"owners": owners, "model": model, "user_id": "ada"}
    exec("from strands import Agent\n" + lines(readme, "Strands Agents"), namespace)
    namespace["agent"]("Fix it")
    assert [event["type"] for event in owners.session("ada").events] == ["turn/start", EVENT_TYPE]
    written = owners.session("ada").latest([EVENT_TYPE])
    assert written is not None
    assert written["data"] == {"todos": PLAN, "callId": "t1"}


@pytest.mark.parametrize("readme", ["README.md", "README.zh.md"])
@pytest.mark.skipif(sys.version_info < (3, 11), reason="dev installs it on Python 3.11+")
def test_the_claude_agent_sdk_lines(readme: str) -> None:
    from claude_agent_sdk import ClaudeSDKClient

    from tests.integrations.test_claude_agent_sdk import ClaudeCode

    owners = OwnerRegistry()
    namespace: dict[str, Any] = {"owners": owners, "user_id": "ada"}
    source = "from claude_agent_sdk import ClaudeAgentOptions\n"
    exec(source + lines(readme, "Claude Agent SDK (Python)"), namespace)

    async def run() -> Any:
        cli = ClaudeCode()  # Claude Code's side, scripted: the API is out of reach here
        async with ClaudeSDKClient(namespace["options"], transport=cli):
            await cli.handshake()
            await cli.prompt("Fix it")
            return await cli.call({"todos": PLAN})

    result = asyncio.run(asyncio.wait_for(run(), 60))
    assert result["isError"] is False
    assert [event["type"] for event in owners.session("ada").events] == ["turn/start", EVENT_TYPE]
    assert namespace["todo"].tool_name == "mcp__todo__todo_write"


@pytest.mark.parametrize("readme", ["README.md", "README.zh.md"])
def test_the_agent_framework_lines(readme: str) -> None:
    from tests.integrations.test_agent_framework import ScriptedClient

    owners = OwnerRegistry()
    model = ScriptedClient([[("t1", {"todos": PLAN})], "On it."])
    namespace: dict[str, Any] = {"owners": owners, "model": model}
    exec(
        "from agent_framework import Agent\n" + lines(readme, "Microsoft Agent Framework"),
        namespace,
    )
    agent = namespace["agent"]
    session = agent.create_session()
    asyncio.run(agent.run("Fix it", session=session))
    assert [event["type"] for event in owners.session(session.session_id).events] == [
        "turn/start",
        EVENT_TYPE,
    ]
    written = owners.session(session.session_id).latest([EVENT_TYPE])
    assert written is not None
    assert written["data"] == {"todos": PLAN, "callId": "t1"}
