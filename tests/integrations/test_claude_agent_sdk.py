"""The Claude Agent SDK adapter, through the SDK's own bridge to in-process MCP servers.

The agent loop runs in Claude Code against Anthropic's API, which this machine cannot
reach, so the loop itself is not run. What Claude Code would do is played by a transport
standing in for its process: ``ClaudeSDKClient`` connects through it (the SDK's
``initialize``, with our hook registered), then it sends the control requests Claude Code
sends — ``mcp_message`` carrying MCP ``initialize``, ``tools/list`` and ``tools/call`` for
the server named ``todo``, and ``hook_callback`` for ``UserPromptSubmit`` — and reads the
SDK's answers. Everything between (the client, its query, the MCP bridge, the hooks) is
the SDK's.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from dsh_tool_todo.core.contract import EVENT_TYPE

if sys.version_info < (3, 11):  # pragma: no cover - dev installs claude-agent-sdk on 3.11+ only
    pytest.skip("dev installs claude-agent-sdk on Python 3.11+", allow_module_level=True)
from claude_agent_sdk import ClaudeAgentOptions, ClaudeSDKClient, create_sdk_mcp_server, tool
from claude_agent_sdk._internal.transport import Transport

from dsh_tool_todo import todo_write_tool
from dsh_tool_todo.core import contract
from dsh_tool_todo.core.schema import parameters
from dsh_tool_todo.errors import UsageError
from dsh_tool_todo.integrations.claude_agent_sdk import stdio_config, todo_write_for_claude
from dsh_tool_todo.stores.memory import MemorySession
from dsh_tool_todo.stores.owners import OwnerRegistry
from tests.integrations.adapter_contract import CAUSE, FailingSession, SlowSession

PLAN = {"todos": [{"content": "Read the code", "status": "in_progress"}]}


class ClaudeCode(Transport):
    """Claude Code's side of the control channel, scripted."""

    def __init__(self) -> None:
        self.inbox: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self.answers: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self.initialize: dict[str, Any] = {}
        self.ids = itertools.count()

    async def connect(self) -> None:
        pass

    def is_ready(self) -> bool:
        return True

    async def end_input(self) -> None:
        pass

    async def close(self) -> None:
        await self.inbox.put(None)

    async def write(self, data: str) -> None:
        message = json.loads(data)
        if message["type"] == "control_request" and message["request"]["subtype"] == "initialize":
            self.initialize = message["request"]
            reply = {"subtype": "success", "request_id": message["request_id"], "response": {}}
            await self.inbox.put({"type": "control_response", "response": reply})
        elif message["type"] == "control_response":
            self.answers[message["response"]["request_id"]].set_result(message["response"])

    async def read_messages(self) -> AsyncIterator[dict[str, Any]]:
        while (message := await self.inbox.get()) is not None:
            yield message

    async def control(self, request: dict[str, Any]) -> dict[str, Any]:
        request_id = f"cli-{next(self.ids)}"
        self.answers[request_id] = asyncio.get_running_loop().create_future()
        await self.inbox.put(
            {"type": "control_request", "request_id": request_id, "request": request}
        )
        answer = await self.answers[request_id]
        del self.answers[request_id]
        assert answer["subtype"] == "success", answer
        return dict(answer["response"])

    async def mcp(self, method: str, params: dict[str, Any], *, notify: bool = False) -> Any:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
        if not notify:
            message["id"] = next(self.ids)
        request = {"subtype": "mcp_message", "server_name": "todo", "message": message}
        response = (await self.control(request))["mcp_response"]
        return None if notify else response["result"]

    async def handshake(self) -> None:
        client_info = {"name": "claude-code", "version": "2"}
        params = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": client_info}
        await self.mcp("initialize", params)
        await self.mcp("notifications/initialized", {}, notify=True)

    async def call(self, arguments: Any) -> dict[str, Any]:
        result = await self.mcp("tools/call", {"name": "todo_write", "arguments": arguments})
        return dict(result)

    async def prompt(self, text: str) -> dict[str, Any]:
        (matcher,) = self.initialize["hooks"]["UserPromptSubmit"]
        (callback_id,) = matcher["hookCallbackIds"]
        hook_input = {
            "hook_event_name": "UserPromptSubmit",
            "prompt": text,
            "session_id": "s1",
            "transcript_path": "/dev/null",
            "cwd": "/",
        }
        request = {"subtype": "hook_callback", "callback_id": callback_id, "input": hook_input}
        return await self.control(request)


def through_the_sdk(
    options: ClaudeAgentOptions, script: Callable[[ClaudeCode], Awaitable[Any]]
) -> Any:
    async def run() -> Any:
        cli = ClaudeCode()
        async with ClaudeSDKClient(options, transport=cli):
            return await script(cli)

    # a lost answer fails the test instead of hanging it
    return asyncio.run(asyncio.wait_for(run(), 60))


def options_for(owners: OwnerRegistry, owner: str = "ada", parallel: bool = False) -> Any:
    todo = todo_write_for_claude(allow_parallel_in_progress=parallel, owner=owner, owners=owners)
    return todo, ClaudeAgentOptions(
        mcp_servers={"todo": todo.server}, hooks=todo.hooks, allowed_tools=[todo.tool_name]
    )


@pytest.mark.parametrize(
    ("parallel", "description"),
    [(False, contract.DESCRIPTION_SINGLE), (True, contract.DESCRIPTION_PARALLEL)],
)
def test_claude_code_lists_exactly_our_tool(parallel: bool, description: str) -> None:
    todo, options = options_for(OwnerRegistry(), parallel=parallel)

    async def script(cli: ClaudeCode) -> Any:
        await cli.handshake()
        return await cli.mcp("tools/list", {})

    (listed,) = through_the_sdk(options, script)["tools"]
    assert (listed["name"], listed["description"]) == (contract.TOOL_NAME, description)
    assert listed["inputSchema"] == parameters()
    assert todo.tool_name == "mcp__todo__todo_write"


def test_calls_record_refusals_read_our_text_and_a_prompt_starts_a_turn() -> None:
    owners = OwnerRegistry()
    _, options = options_for(owners)

    async def script(cli: ClaudeCode) -> Any:
        await cli.handshake()
        hook = await cli.prompt("Fix the bug")
        refused = await cli.call({**PLAN, "merge": True})
        recorded = await cli.call(PLAN)
        return hook, refused, recorded

    hook, refused, recorded = through_the_sdk(options, script)
    expected = todo_write_tool(allow_parallel_in_progress=False).call(
        {**PLAN, "merge": True}, MemorySession()
    )
    assert expected.startswith("Error: ")
    assert refused["isError"] is True
    assert [block["text"] for block in refused["content"]] == [expected]
    assert recorded["isError"] is False
    assert recorded["content"] == [
        {"type": "text", "text": "Updated todo list: 0 pending, 1 in progress, 0 completed."}
    ]
    assert hook == {}
    events = owners.session("ada").events
    assert [e["type"] for e in events] == ["turn/start", EVENT_TYPE]
    assert events[1]["data"] == PLAN  # MCP request ids are per connection: no call id


def test_the_sdk_tool_decorator_would_replace_our_refusal_text() -> None:
    # why the adapter passes its own server: the SDK's @tool validates first
    @tool("todo_write", contract.DESCRIPTION_SINGLE, parameters())
    async def handler(args: dict[str, Any]) -> dict[str, Any]:
        raise AssertionError("never reached for an invalid call")

    server = create_sdk_mcp_server("todo", tools=[handler])
    options = ClaudeAgentOptions(mcp_servers={"todo": server})

    async def script(cli: ClaudeCode) -> Any:
        await cli.handshake()
        return await cli.call({**PLAN, "merge": True})

    result = through_the_sdk(options, script)
    assert result["isError"] is True
    assert "validation error" in result["content"][0]["text"].lower()


def test_a_failing_store_reads_not_recorded_with_the_cause_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    owners = OwnerRegistry(open_session=lambda key: FailingSession())
    _, options = options_for(owners)

    async def script(cli: ClaudeCode) -> Any:
        await cli.handshake()
        return await cli.call(PLAN)

    with caplog.at_level(logging.ERROR, logger="dsh_tool_todo"):
        result = through_the_sdk(options, script)
    assert result["isError"] is True
    assert result["content"][0]["text"] == contract.NOT_RECORDED
    assert any(CAUSE in r.getMessage() for r in caplog.records if r.name == "dsh_tool_todo")


def test_calls_sent_at_once_are_recorded_one_at_a_time_in_order() -> None:
    session = SlowSession()
    owners = OwnerRegistry(open_session=lambda key: session)
    _, options = options_for(owners)
    plans = [{"todos": [{"content": f"Step {n}", "status": "pending"}]} for n in range(5)]

    async def script(cli: ClaudeCode) -> Any:
        await cli.handshake()
        return await asyncio.gather(*(cli.call(plan) for plan in plans))

    results = through_the_sdk(options, script)
    assert all(result["isError"] is False for result in results)
    assert not session.overlapped
    assert [data["todos"] for data in session.data] == [plan["todos"] for plan in plans]


@pytest.mark.parametrize(
    ("log_dir", "said"),
    [
        ("", r"^stdio_config: log_dir= takes the directory of the session logs, an absolute"),
        (" ", r"^stdio_config: log_dir= takes the directory"),
        (7, r"^stdio_config: log_dir= takes the directory.*not 7$"),
        ("plans", r"^stdio_config: log_dir='plans' is relative.*Path\('plans'\)\.resolve\(\)"),
    ],
)
def test_the_stdio_config_refuses_a_log_dir_the_server_could_not_use(
    log_dir: Any, said: str
) -> None:
    with pytest.raises(UsageError, match=said):
        stdio_config(allow_parallel_in_progress=False, log_dir=log_dir)


def test_the_stdio_config_refuses_a_log_dir_under_a_file_and_a_bad_owner(tmp_path: Any) -> None:
    (tmp_path / "a-file").write_text("", encoding="utf-8")
    with pytest.raises(UsageError, match=r"cannot be written: .*a-file is not a directory"):
        stdio_config(allow_parallel_in_progress=False, log_dir=tmp_path / "a-file" / "plans")
    with pytest.raises(
        UsageError,
        match=r"^stdio_config: owner= takes an owner key \(a non-empty str\), not str ''",
    ):
        stdio_config(allow_parallel_in_progress=False, log_dir=tmp_path, owner="")
    with pytest.raises(UsageError, match=r"^stdio_config: owner= takes an owner key"):
        stdio_config(allow_parallel_in_progress=False, owner=None)  # type: ignore[arg-type]


def test_the_stdio_config_takes_a_log_dir_to_be_made(tmp_path: Any) -> None:
    config = stdio_config(allow_parallel_in_progress=False, log_dir=tmp_path / "new" / "plans")
    assert config["args"][1:3] == ["--log-dir", str(tmp_path / "new" / "plans")]


def test_the_stdio_config_starts_dsh_todo_mcp(tmp_path: Any) -> None:
    config = stdio_config(allow_parallel_in_progress=True, log_dir=tmp_path, owner="ada")
    assert config["type"] == "stdio"
    assert config["args"][-5:] == ["--parallel", "--log-dir", str(tmp_path), "--owner", "ada"]
    assert config["command"].startswith("/")
    # the command is runnable as it stands: it prints the same server's client config
    run = subprocess.run(
        [config["command"], *config["args"], "--print-config"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    printed = json.loads(run.stdout)["mcpServers"]["todo"]
    assert (printed["command"], printed["args"]) == (config["command"], config["args"])
