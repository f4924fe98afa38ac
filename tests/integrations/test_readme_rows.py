"""Each row of the README's framework table, followed as printed: ``DSH_TODO_HOME`` names a
temporary directory, the row's lines run (with the framework's scripted test model as
``model``), one model turn records a plan, and ``dsh-todo sessions``, ``show --session KEY`` and
the row's own "watch it" command, given no source, find it there.

The lines name ``model``, ``prompt`` and ``user_id`` as the note under the table defines them.
Both READMEs carry the same lines. CrewAI's row is followed in ``test_crewai.py``, which its own
environment runs.
"""

from __future__ import annotations

import ast
import asyncio
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.integrations.readme_rows import PLAN, READMES, ROOT, assert_shown, recording_home, row

USER = "ada"
NEEDS_3_11 = pytest.mark.skipif(sys.version_info < (3, 11), reason="dev installs it on 3.11+")


def run_comment(code: str, scope: dict[str, Any]) -> None:
    """The statements the lines' last comment says to run next, as printed, in ``scope``."""
    steps = [step.strip() for step in code.rsplit("  # ", 1)[1].split(";")]
    if not any(step.startswith("await ") or " await " in step for step in steps):
        exec("\n".join(steps), scope)
        return
    body = "".join(f"    {step}\n" for step in steps)
    exec(f"async def steps():\n{body}    globals().update(locals())\n", scope)
    asyncio.run(scope["steps"]())


@pytest.mark.parametrize("readme", READMES)
def test_the_mcp_row(readme: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The printed config, run as a client runs it: its own environment (no DSH_TODO_HOME, no
    venv on PATH) and directory; the plan lands where the printing shell's variable named, in
    the server's own log, which `dsh-todo watch` shows as the newest."""
    import subprocess

    import mcp
    from mcp.client.stdio import StdioServerParameters, stdio_client

    command = row(readme, "mcp").code.splitlines()[0].split()
    assert command[:3] == [".venv/bin/dsh-todo", "mcp", "--print-config"]
    home = tmp_path / "plans"
    monkeypatch.setenv("DSH_TODO_HOME", str(home))
    printed = subprocess.run(
        [str(Path(sys.executable).parent / "dsh-todo"), *command[1:]],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    (entry,) = json.loads(printed.stdout)["mcpServers"].values()
    client_home = tmp_path / "client"
    client_home.mkdir()
    env = {"PATH": "/usr/bin:/bin", "HOME": str(client_home), **entry.get("env", {})}
    parameters = StdioServerParameters(
        command=entry["command"], args=entry["args"], env=env, cwd=str(client_home)
    )

    async def one_call() -> Any:
        with (tmp_path / "server.err").open("w") as errlog:
            if hasattr(mcp, "Client"):
                async with mcp.Client(stdio_client(parameters, errlog=errlog)) as client:
                    return await client.call_tool("todo_write", {"todos": PLAN})
            async with (
                stdio_client(parameters, errlog=errlog) as (read, write),
                mcp.ClientSession(read, write) as session,
            ):
                await session.initialize()
                return await session.call_tool("todo_write", {"todos": PLAN})

    assert asyncio.run(asyncio.wait_for(one_call(), 60)).isError is False
    assert row(readme, "mcp").watch == ["watch"]  # the newest log: the server's own
    assert_shown(home, row(readme, "mcp").watch, None)


@pytest.mark.parametrize("readme", READMES)
def test_the_langchain_row(readme: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from langchain_core.messages import AIMessage

    from tests.integrations.scripted_langchain import ScriptedChatModel, tool_calls

    lines = row(readme, "langchain")
    model = ScriptedChatModel(
        script=[tool_calls(("todo_write", {"todos": PLAN})), AIMessage("On it.")]
    )
    scope: dict[str, Any] = {
        "model": model,
        "state": {"messages": [{"role": "user", "content": "Fix it"}]},
        "thread_id": USER,
    }
    with recording_home(monkeypatch, tmp_path):
        exec("from langchain.agents import create_agent\n" + lines.code, scope)
        run_comment(lines.code, scope)
    assert_shown(tmp_path, lines.watch, USER)


@pytest.mark.parametrize("readme", READMES)
def test_the_pydantic_ai_row(readme: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import FunctionModel

    def scripted(messages: Any, info: Any) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart("todo_write", {"todos": PLAN})])
        return ModelResponse(parts=[TextPart("On it.")])

    lines = row(readme, "pydantic-ai")
    scope = {"model": FunctionModel(scripted), "prompt": "Fix it", "user_id": USER}
    source = "from pydantic_ai import Agent\n" + lines.code
    code = compile(source, readme, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    with recording_home(monkeypatch, tmp_path):
        asyncio.run(eval(code, scope))  # the line awaits, as in an async function
    assert_shown(tmp_path, lines.watch, USER)


@pytest.mark.parametrize("readme", READMES)
def test_the_openai_agents_row(
    readme: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agents import RunConfig, Runner
    from agents.testing import ScriptedModel, assistant_message, function_call

    lines = row(readme, "openai-agents")
    model = ScriptedModel(
        [
            [function_call("todo_write", {"todos": PLAN}, call_id="c1")],
            [assistant_message("On it.")],
        ]
    )
    scope: dict[str, Any] = {}
    with recording_home(monkeypatch, tmp_path):
        exec("from agents import Agent\n" + lines.code, scope)
        agent = scope["agent"].clone(model=model)
        config = RunConfig(tracing_disabled=True)  # the comment's call, with no trace export
        assert lines.comment == 'Runner.run(agent, prompt, context={"user": user_id})'
        asyncio.run(Runner.run(agent, "Fix it", context={"user": USER}, run_config=config))
    assert_shown(tmp_path, lines.watch, USER)


@pytest.mark.parametrize("readme", READMES)
@NEEDS_3_11
# a workflow touches pydantic's deprecated attributes of the agent (the framework's warnings)
@pytest.mark.filterwarnings("ignore::pydantic.warnings.PydanticDeprecationWarning")
def test_the_llama_index_row(readme: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from llama_index.core.llms.mock import MockFunctionCallingLLM
    from llama_index.core.workflow import Context

    from tests.integrations.scripted_llama_index import Script

    lines = row(readme, "llama-index")
    model = MockFunctionCallingLLM(response_generator=Script([("c1", {"todos": PLAN})]))
    scope: dict[str, Any] = {"model": model, "Context": Context, "user_id": USER, "prompt": "Fix"}
    with recording_home(monkeypatch, tmp_path):
        exec("from llama_index.core.agent.workflow import FunctionAgent\n" + lines.code, scope)
        run_comment(lines.code, scope)
    assert_shown(tmp_path, lines.watch, USER)


@pytest.mark.parametrize("readme", READMES)
@NEEDS_3_11
def test_the_google_adk_row(readme: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from google.adk.runners import InMemoryRunner
    from google.genai import types

    from tests.integrations.scripted_google_adk import ScriptedLlm, calls_of

    lines = row(readme, "google-adk")
    script = [calls_of([("c1", {"todos": PLAN})]), [types.Part(text="done")]]
    scope: dict[str, Any] = {"model": ScriptedLlm(model="scripted", script=script)}

    async def one_turn(runner: InMemoryRunner) -> str:
        session = await runner.session_service.create_session(app_name="a", user_id=USER)
        message = types.Content(role="user", parts=[types.Part(text="Fix it")])
        async for _ in runner.run_async(user_id=USER, session_id=session.id, new_message=message):
            pass
        return session.id

    with recording_home(monkeypatch, tmp_path):
        exec("from google.adk.agents import LlmAgent\n" + lines.code, scope)
        session_id = asyncio.run(one_turn(InMemoryRunner(agent=scope["agent"], app_name="a")))
    assert_shown(tmp_path, lines.watch, session_id)


@pytest.mark.parametrize("readme", READMES)
@NEEDS_3_11
def test_the_strands_row(readme: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.integrations.scripted_strands import ScriptedModel

    lines = row(readme, "strands")
    model = ScriptedModel([[("t1", {"todos": PLAN})], "On it."])
    scope: dict[str, Any] = {"model": model, "user_id": USER, "prompt": "Fix it"}
    with recording_home(monkeypatch, tmp_path):
        exec("from strands import Agent\n" + lines.code, scope)
        run_comment(lines.code, scope)
    assert_shown(tmp_path, lines.watch, USER)


@pytest.mark.parametrize("readme", READMES)
@NEEDS_3_11
def test_the_claude_agent_sdk_row(
    readme: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from claude_agent_sdk import ClaudeSDKClient

    from tests.integrations.test_claude_agent_sdk import ClaudeCode

    lines = row(readme, "claude-agent-sdk")
    scope: dict[str, Any] = {"user_id": USER}

    async def one_turn() -> Any:
        cli = ClaudeCode()  # Claude Code's side, scripted: the API is out of reach here
        async with ClaudeSDKClient(scope["options"], transport=cli):
            await cli.handshake()
            await cli.prompt("Fix it")
            return await cli.call({"todos": PLAN})

    with recording_home(monkeypatch, tmp_path):
        exec("from claude_agent_sdk import ClaudeAgentOptions\n" + lines.code, scope)
        assert asyncio.run(asyncio.wait_for(one_turn(), 60))["isError"] is False
    assert_shown(tmp_path, lines.watch, USER)


@pytest.mark.parametrize("readme", READMES)
def test_the_agent_framework_row(
    readme: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.integrations.test_agent_framework import ScriptedClient

    lines = row(readme, "agent-framework")
    model = ScriptedClient([[("t1", {"todos": PLAN})], "On it."])
    scope: dict[str, Any] = {"model": model, "prompt": "Fix it"}
    with recording_home(monkeypatch, tmp_path):
        exec("from agent_framework import Agent\n" + lines.code, scope)
        run_comment(lines.code, scope)
    assert_shown(tmp_path, lines.watch, scope["session"].session_id)


@pytest.mark.parametrize("readme", READMES)
def test_the_raw_loop_row(readme: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The log is the loop's own, in the directory it runs in: here, the variable's."""
    lines = row(readme, "raw-loops")
    monkeypatch.chdir(tmp_path)
    scope: dict[str, Any] = {"user_id": USER, "arguments": {"todos": PLAN}}
    with recording_home(monkeypatch, tmp_path):
        exec("import dsh_tool_todo\n" + lines.code, scope)
        scope["session"].close()
    assert scope["text"] == "Updated todo list: 0 pending, 1 in progress, 0 completed."
    assert_shown(tmp_path, lines.watch, USER, cwd=tmp_path)


@pytest.mark.parametrize("readme", READMES)
def test_the_llm_row(readme: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``llm.Tool`` over the raw loop's ``tool`` and ``session``, driven by the real ``llm``
    package with a scripted model (docs/integrations/llm-and-smolagents.md's)."""
    import llm

    class Scripted(llm.Model):  # type: ignore[misc]
        model_id = "scripted"
        supports_tools = True

        def execute(self, prompt: Any, stream: Any, response: Any, conversation: Any) -> Any:
            if not prompt.tool_results:
                call = llm.ToolCall(name="todo_write", arguments={"todos": PLAN}, tool_call_id="c1")
                response.add_tool_call(call)
                return
            yield prompt.tool_results[0].output

    loop = row(readme, "raw-loops").code.splitlines()
    lines = row(readme, "llm-and-smolagents")
    monkeypatch.chdir(tmp_path)
    scope: dict[str, Any] = {"user_id": USER, "llm": llm}
    with recording_home(monkeypatch, tmp_path):
        exec("import dsh_tool_todo\n" + "\n".join(loop[:-1]), scope)  # all but the call
        tool = eval(lines.code, scope)
        reply = Scripted().chain("Fix it", tools=[tool]).text()
        scope["session"].close()
    assert reply == "Updated todo list: 0 pending, 1 in progress, 0 completed."
    assert_shown(tmp_path, lines.watch, USER, cwd=tmp_path)


FOLLOWED = {
    "mcp": test_the_mcp_row,
    "langchain": test_the_langchain_row,
    "pydantic-ai": test_the_pydantic_ai_row,
    "openai-agents": test_the_openai_agents_row,
    "llama-index": test_the_llama_index_row,
    "google-adk": test_the_google_adk_row,
    "strands": test_the_strands_row,
    "claude-agent-sdk": test_the_claude_agent_sdk_row,
    "agent-framework": test_the_agent_framework_row,
    "raw-loops": test_the_raw_loop_row,
    "llm-and-smolagents": test_the_llm_row,
}


@pytest.mark.parametrize("readme", READMES)
def test_every_row_is_followed(readme: str) -> None:
    """A row added to the table needs its test: each page the table links has one here, or,
    for CrewAI, in test_crewai.py (which its own environment runs)."""
    text = (ROOT / readme).read_text(encoding="utf-8")
    linked = re.findall(r"^\| \[[^\]]+\]\(docs/integrations/([\w-]+)\.md\)", text, re.M)
    assert sorted(linked) == sorted([*FOLLOWED, "crewai"])
    crewai = (ROOT / "tests" / "integrations" / "test_crewai.py").read_text(encoding="utf-8")
    assert "def test_the_readme_row(" in crewai
