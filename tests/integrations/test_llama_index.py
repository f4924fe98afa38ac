"""LlamaIndex: the adapter contract through a real ``FunctionAgent`` loop (the framework's
own ``MockFunctionCallingLLM`` with a scripted response generator), plus ReActAgent's
prompt, the Context as owner, the sync path and the no-owner answer."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from dsh_tool_todo.core.contract import EVENT_TYPE

if sys.version_info < (3, 11):  # pragma: no cover - dev installs llama-index-core on 3.11+ only
    pytest.skip("dev installs llama-index-core on Python 3.11+", allow_module_level=True)
from llama_index.core.agent.workflow import FunctionAgent, ReActAgent
from llama_index.core.llms import ChatMessage, MessageRole
from llama_index.core.llms.mock import MockFunctionCallingLLM
from llama_index.core.tools import ToolOutput
from llama_index.core.workflow import Context

from dsh_tool_todo.core import contract
from dsh_tool_todo.core.schema import parameters
from dsh_tool_todo.errors import UsageError
from dsh_tool_todo.integrations.llama_index import TodoWriteLlamaTool, todo_write_llama_tool
from dsh_tool_todo.stores.owners import OwnerRegistry
from tests.integrations.adapter_contract import CHECKS, Driver, RecordingSession, Reply, opener
from tests.integrations.scripted_llama_index import Script

# A workflow looks its steps up with inspect.getmembers, which touches pydantic's deprecated
# attributes of the agent (a pydantic model) when it is built and run: the framework's warnings.
pytestmark = pytest.mark.filterwarnings("ignore::pydantic.warnings.PydanticDeprecationWarning")


PLAN = {"todos": [{"content": "Read the code", "status": "in_progress"}]}


def run_agent(tool: Any, script: Script, ctx_user: str | None = None) -> list[Any]:
    """One ``agent.run`` through the real FunctionAgent workflow; the ToolCallResult events."""
    agent = FunctionAgent(llm=MockFunctionCallingLLM(response_generator=script), tools=[tool])

    async def run() -> list[Any]:
        ctx = Context(agent)
        if ctx_user is not None:
            await ctx.store.set("user", ctx_user)
        handler = agent.run("plan it", ctx=ctx)
        results = [
            ev async for ev in handler.stream_events() if type(ev).__name__ == "ToolCallResult"
        ]
        await handler
        return results

    return asyncio.run(run())


def registry_of(session: Any) -> OwnerRegistry:
    return OwnerRegistry(open_session=opener(session))


class LlamaIndexDriver:
    call_ids = False  # LlamaIndex hands a tool its arguments and the Context, not the call id

    def offered(self, *, parallel: bool) -> tuple[str, str, Mapping[str, Any]]:
        script = Script()
        run_agent(todo_write_llama_tool(allow_parallel_in_progress=parallel, owner="me"), script)
        (tool,) = script.requests[0][1]
        function = tool.metadata.to_openai_tool()["function"]  # what an OpenAI request carries
        return function["name"], function["description"], function["parameters"]

    def turn(self, calls: Sequence[tuple[str, Any]], session: Any) -> list[Reply]:
        tool = todo_write_llama_tool(
            allow_parallel_in_progress=False, owner="me", owners=registry_of(session)
        )
        script = Script(*([calls] if calls else []))
        events = run_agent(tool, script)
        # what the model reads: the tool messages of the second request, by call id
        read = {
            m.additional_kwargs["tool_call_id"]: m.content
            for m in script.requests[1][0]
            if m.role == MessageRole.TOOL
        }
        flags = {ev.tool_id: ev.tool_output.is_error for ev in events}
        return [Reply(read[cid], flags[cid]) for cid, _ in calls]


DRIVER: Driver = LlamaIndexDriver()


@pytest.mark.parametrize(
    "check",
    [c for name, c in CHECKS.items() if name != "repeated_call_id"],
    ids=lambda c: c.__name__,
)
def test_adapter_contract(check: Any) -> None:
    check(DRIVER)


def test_a_refusal_is_an_error_tool_output_and_a_success_is_not() -> None:
    session = RecordingSession()
    replies = DRIVER.turn([("c1", {**PLAN, "merge": True}), ("c2", PLAN)], session)
    assert replies == [
        Reply(
            "Error: invalid todos: unknown argument `merge`; todo_write takes only `todos`", True
        ),
        Reply("Updated todo list: 0 pending, 1 in progress, 0 completed.", False),
    ]
    assert session.data == [PLAN]


def test_the_default_metadata_would_drop_additional_properties_ours_keeps_it() -> None:
    from llama_index.core.tools import FunctionTool

    def todo_write(todos: list[dict[str, str]]) -> str:
        return ""

    default = FunctionTool.from_defaults(todo_write).metadata.get_parameters_dict()
    ours = todo_write_llama_tool(allow_parallel_in_progress=False, owner="me")
    assert "additionalProperties" not in default  # why the adapter has its own metadata
    assert ours.metadata.get_parameters_dict() == parameters()
    assert ours.metadata.get_parameters_dict()["additionalProperties"] is False
    # a request builder that edits what it got does not change the next request
    ours.metadata.get_parameters_dict()["properties"].clear()
    assert ours.metadata.get_parameters_dict() == parameters()


# ReActAgent's own step asks ctx.is_running, which its workflow package deprecates
@pytest.mark.filterwarnings("ignore:is_running called from within a step:DeprecationWarning")
def test_react_agents_prompt_carries_our_schema_and_its_loop_records() -> None:
    owners = OwnerRegistry()
    tool = todo_write_llama_tool(allow_parallel_in_progress=False, owner="me", owners=owners)
    prompts: list[str] = []

    def react(messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
        prompts.append("\n".join(m.content or "" for m in messages))
        if len(prompts) == 1:
            text = (
                f"Thought: I need a plan.\nAction: todo_write\nAction Input: {json.dumps(PLAN)}\n"
            )
        else:
            text = "Thought: I can answer without using any more tools.\nAnswer: done"
        return ChatMessage(role=MessageRole.ASSISTANT, content=text)

    agent = ReActAgent(llm=MockFunctionCallingLLM(response_generator=react), tools=[tool])

    async def run() -> None:
        await agent.run("plan it")

    asyncio.run(run())
    assert f"Tool Args: {json.dumps(parameters(), ensure_ascii=False)}" in prompts[0]
    assert "Observation: Updated todo list: 0 pending, 1 in progress, 0 completed." in prompts[1]
    written = owners.session("me").latest([EVENT_TYPE])
    assert written is not None
    assert written["data"] == PLAN


def test_the_owner_is_read_from_the_context_and_lasts_across_runs() -> None:
    owners = OwnerRegistry()
    tool = todo_write_llama_tool(
        allow_parallel_in_progress=False,
        owner=lambda ctx: ctx.store.get("user", default=None),
        owners=owners,
    )
    run_agent(tool, Script([("c1", PLAN)]), ctx_user="ada")
    run_agent(tool, Script([("c1", {"todos": []})]), ctx_user="bob")
    ada = owners.session("ada").latest([EVENT_TYPE])
    bob = owners.session("bob").latest([EVENT_TYPE])
    assert ada is not None
    assert bob is not None
    assert (ada["data"], bob["data"]) == (PLAN, {"todos": []})


def test_no_owner_is_refused_with_the_specifications_text_and_warned_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    owners = OwnerRegistry()
    tool = todo_write_llama_tool(
        allow_parallel_in_progress=False,
        owner=lambda ctx: ctx.store.get("user", default=None),
        owners=owners,
    )
    with caplog.at_level(logging.WARNING, logger="dsh_tool_todo"):
        (event,) = run_agent(tool, Script([("c1", PLAN)]))  # nobody set "user"
        (again,) = run_agent(tool, Script([("c1", PLAN)]))
    assert (event.tool_output.content, event.tool_output.is_error) == (contract.NO_OWNER, True)
    assert again.tool_output.content == contract.NO_OWNER
    assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == 1
    assert owners.owners() == []


def test_the_sync_call_records_and_refuses_an_awaitable_owner() -> None:
    owners = OwnerRegistry()
    tool = todo_write_llama_tool(allow_parallel_in_progress=False, owner="me", owners=owners)
    output = tool.call(**PLAN)  # a fixed owner needs no Context
    assert isinstance(output, ToolOutput)
    assert (output.content, output.is_error) == (
        "Updated todo list: 0 pending, 1 in progress, 0 completed.",
        False,
    )
    bad = tool.call(todos=[{"content": "", "status": "pending"}])
    assert bad.is_error
    assert bad.content.startswith("Error:")
    written = owners.session("me").latest([EVENT_TYPE])
    assert written is not None
    assert written["data"] == PLAN

    async def user(ctx: Any) -> str:
        return "ada"

    lazy = todo_write_llama_tool(allow_parallel_in_progress=False, owner=user, owners=owners)
    with pytest.raises(UsageError, match=r"use await tool\.acall"):
        lazy.call(dsh_todo_ctx=object(), **PLAN)
    assert owners.owners() == ["me"]  # nothing recorded for the refused call
    with pytest.raises(UsageError, match="keyword arguments only"):
        tool.call(PLAN)


def test_an_owner_that_is_neither_a_key_nor_a_function_is_refused() -> None:
    with pytest.raises(UsageError, match="owner= takes an owner key"):
        todo_write_llama_tool(allow_parallel_in_progress=False, owner=7)  # type: ignore[arg-type]


def test_the_tool_is_a_function_tool_the_agent_hands_the_context() -> None:
    tool = todo_write_llama_tool(allow_parallel_in_progress=False, owner="me")
    assert isinstance(tool, TodoWriteLlamaTool)
    assert (tool.requires_context, tool.ctx_param_name) == (True, "dsh_todo_ctx")


def test_a_model_argument_named_ctx_is_refused_not_swallowed() -> None:
    session = RecordingSession()
    (reply,) = DRIVER.turn([("c1", {**PLAN, "ctx": 1})], session)
    assert reply == Reply(
        "Error: invalid todos: unknown argument `ctx`; todo_write takes only `todos`", True
    )
    assert session.data == []
