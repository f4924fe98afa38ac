"""TodoWriteMiddleware's plan on LangGraph's ``custom`` stream, in a real ``create_agent`` graph."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from typing import Any

import pytest
from ag_ui.core import ActivitySnapshotEvent
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from dsh_tool_todo import todo_write_tool
from dsh_tool_todo.integrations.langchain import TodoWriteMiddleware
from dsh_tool_todo.stores.memory import MemorySession
from tests._builders import PLAN_A, PLAN_B
from tests.integrations.scripted_langchain import ScriptedChatModel, todo_write_call, tool_calls

BAD = {"todos": PLAN_A, "merge": True}
THREAD = {"configurable": {"thread_id": "t1"}}
Stream = Callable[..., list[Any]]


def renumbered(message: AIMessage, first: int) -> AIMessage:
    """A later model turn: its call ids continue from ``first`` (a repeated id is a retry)."""
    calls = [{**call, "id": f"call-{first + i}"} for i, call in enumerate(message.tool_calls)]
    return AIMessage(content="", tool_calls=calls)


def agent_with(script: list[AIMessage], **options: Any) -> Any:
    middleware = TodoWriteMiddleware(allow_parallel_in_progress=False, **options)
    return create_agent(
        ScriptedChatModel(script=script), middleware=[middleware], checkpointer=InMemorySaver()
    )


def sync_stream(agent: Any, text: str, config: Any, mode: Any = "custom") -> list[Any]:
    return list(agent.stream({"messages": [HumanMessage(text)]}, config, stream_mode=mode))


def async_stream(agent: Any, text: str, config: Any, mode: Any = "custom") -> list[Any]:
    async def chunks() -> list[Any]:
        return [
            chunk
            async for chunk in agent.astream(
                {"messages": [HumanMessage(text)]}, config, stream_mode=mode
            )
        ]

    return asyncio.run(chunks())


@pytest.fixture(params=[sync_stream, async_stream], ids=["stream", "astream"])
def stream(request: pytest.FixtureRequest) -> Stream:
    streamer: Stream = request.param
    return streamer


# Before Python 3.11 LangGraph's custom writer cannot run inside asyncio tasks (its config
# context variable is not carried): the adapter then sends nothing and the run goes on.
NO_ASYNC_CHUNKS = sys.version_info < (3, 11)


def sent(stream: Stream, chunks: list[Any]) -> list[Any]:
    """The chunks a consumer of ``stream`` gets on this Python."""
    return [] if NO_ASYNC_CHUNKS and stream is async_stream else chunks


def snapshot(thread: str, todos: list[dict[str, str]]) -> dict[str, Any]:
    return {
        "type": "ACTIVITY_SNAPSHOT",
        "messageId": f"plan:{thread}",
        "activityType": "PLAN",
        "content": {"todos": todos},
        "replace": True,
    }


def test_each_write_and_each_new_turn_is_one_custom_chunk(stream: Stream) -> None:
    script = [
        tool_calls(
            todo_write_call(PLAN_A), todo_write_call(BAD)
        ),  # the refused call records and shows nothing
        renumbered(tool_calls(todo_write_call(PLAN_B)), 2),
        AIMessage("done"),
    ]
    chunks = stream(agent_with(script), "fix it", THREAD)
    assert chunks == sent(
        stream, [snapshot("t1", []), snapshot("t1", PLAN_A), snapshot("t1", PLAN_B)]
    )
    for chunk in chunks:  # each one a valid AG-UI event as it is
        event = ActivitySnapshotEvent.model_validate(chunk)
        assert event.model_dump(mode="json", by_alias=True, exclude_none=True) == chunk


def test_the_model_reads_the_same_texts_while_the_plan_streams(stream: Stream) -> None:
    script = [tool_calls(todo_write_call(PLAN_A), todo_write_call(BAD)), AIMessage("done")]
    chunks = stream(agent_with(script), "fix it", THREAD, ["custom", "values"])
    custom = [chunk for mode, chunk in chunks if mode == "custom"]
    final = [chunk for mode, chunk in chunks if mode == "values"][-1]
    assert custom == sent(stream, [snapshot("t1", []), snapshot("t1", PLAN_A)])
    answers = [m for m in final["messages"] if isinstance(m, ToolMessage)]
    tool = todo_write_tool(allow_parallel_in_progress=False)
    assert [(m.content, m.status) for m in answers] == [
        (tool.call({"todos": PLAN_A}, MemorySession()), "success"),
        (tool.call(BAD, MemorySession()), "error"),
    ]
    assert final["todos"] == PLAN_A


def test_a_plan_kept_across_turns_sends_no_cleared_chunk(stream: Stream) -> None:
    agent = agent_with(
        [tool_calls(todo_write_call(PLAN_A)), AIMessage("a")], clear_on_new_turn=False
    )
    assert stream(agent, "fix it", THREAD) == sent(stream, [snapshot("t1", PLAN_A)])


def test_the_second_turn_clears_the_plan_on_the_stream(stream: Stream) -> None:
    agent = agent_with([tool_calls(todo_write_call(PLAN_A)), AIMessage("a"), AIMessage("b")])
    assert stream(agent, "fix it", THREAD)[-1:] == sent(stream, [snapshot("t1", PLAN_A)])
    assert stream(agent, "thanks", THREAD) == sent(stream, [snapshot("t1", [])])


def test_without_a_thread_the_plan_id_is_the_default_one() -> None:
    middleware = TodoWriteMiddleware(allow_parallel_in_progress=False)
    agent = create_agent(
        ScriptedChatModel(script=[tool_calls(todo_write_call(PLAN_A)), AIMessage("a")]),
        middleware=[middleware],
    )
    assert sync_stream(agent, "fix it", None) == [
        snapshot("default", []),
        snapshot("default", PLAN_A),
    ]


@pytest.mark.parametrize("second", [PLAN_B, PLAN_A], ids=["another-list", "a-retry"])
def test_a_reused_call_id_shows_the_plan_it_recorded(stream: Stream, second: Any) -> None:
    # a provider numbering ids afresh in each response reuses them within a turn: the same
    # id with another list is a new call, recorded and shown (docs/integrations/README.md);
    # the same id with the same list again is a retry: recorded once, shown as recorded
    script = [
        tool_calls(todo_write_call(PLAN_A)),
        tool_calls(todo_write_call(second)),
        AIMessage("done"),
    ]
    chunks = stream(agent_with(script), "fix it", THREAD)
    assert chunks == sent(
        stream, [snapshot("t1", []), snapshot("t1", PLAN_A), snapshot("t1", second)]
    )
