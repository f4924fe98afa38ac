"""TodoWriteMiddleware in a real ``create_agent`` graph, driven by a scripted chat model."""

from __future__ import annotations

import asyncio
import importlib
import json
import sqlite3
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import TodoListMiddleware
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from dsh_tool_todo import UsageError, replay, todo_write_tool
from dsh_tool_todo.core.contract import DESCRIPTION_PARALLEL, DESCRIPTION_SINGLE, EVENT_TYPE
from dsh_tool_todo.core.schema import parameters_json
from dsh_tool_todo.integrations._extras import MissingExtra
from dsh_tool_todo.integrations.langchain import TodoWriteMiddleware
from dsh_tool_todo.stores.memory import MemorySession
from tests._builders import PLAN_A, PLAN_B
from tests.conftest import todo
from tests.integrations.scripted_langchain import ScriptedChatModel, todo_write_call, tool_calls

Run = Callable[..., dict[str, Any]]
THREAD = {"configurable": {"thread_id": "t1"}}


def agent_with(script: list[AIMessage], *, parallel: bool = False, **kwargs: Any) -> Any:
    model = ScriptedChatModel(script=script)
    middleware = TodoWriteMiddleware(allow_parallel_in_progress=parallel)
    return model, create_agent(model, middleware=[middleware], **kwargs)


def sync_run(agent: Any, text: str, config: Any = None) -> dict[str, Any]:
    result: dict[str, Any] = agent.invoke({"messages": [HumanMessage(text)]}, config)
    return result


def async_run(agent: Any, text: str, config: Any = None) -> dict[str, Any]:
    result: dict[str, Any] = asyncio.run(agent.ainvoke({"messages": [HumanMessage(text)]}, config))
    return result


@pytest.fixture(params=[sync_run, async_run], ids=["invoke", "ainvoke"])
def run(request: pytest.FixtureRequest) -> Run:
    runner: Run = request.param
    return runner


def tool_messages(result: dict[str, Any]) -> list[ToolMessage]:
    return [message for message in result["messages"] if isinstance(message, ToolMessage)]


@pytest.mark.parametrize(
    ("parallel", "description"), [(False, DESCRIPTION_SINGLE), (True, DESCRIPTION_PARALLEL)]
)
def test_the_model_is_offered_our_schema_bytes_and_description(
    parallel: bool, description: str
) -> None:
    model, agent = agent_with([AIMessage("nothing to plan")], parallel=parallel)
    sync_run(agent, "hi")
    (offered,) = model.bound_tools
    function = offered["function"]
    assert function["name"] == "todo_write"
    assert function["description"] == description
    # Same keys in the same order, same values: the bytes `dsh-todo schema` prints.
    encoded = json.dumps(function["parameters"], ensure_ascii=False, separators=(",", ":"))
    assert encoded == parameters_json()


def test_no_system_prompt_is_added(run: Run) -> None:
    model, agent = agent_with([AIMessage("ok")])
    run(agent, "hi")
    assert not any(isinstance(message, SystemMessage) for message in model.requests[0])
    with_prompt = ScriptedChatModel(script=[AIMessage("ok")])
    middleware = TodoWriteMiddleware(allow_parallel_in_progress=False)
    run(create_agent(with_prompt, middleware=[middleware], system_prompt="Be brief."), "hi")
    (system,) = [m for m in with_prompt.requests[0] if isinstance(m, SystemMessage)]
    assert system.content == "Be brief."


def test_a_call_records_the_plan_in_the_state(run: Run) -> None:
    _, agent = agent_with([tool_calls(todo_write_call(PLAN_A)), AIMessage("planned")])
    result = run(agent, "fix it")
    assert result["todos"] == PLAN_A
    assert result["todo_events"] == [
        {"seq": 0, "type": "turn/start", "data": {}},
        {"seq": 1, "type": EVENT_TYPE, "data": {"todos": PLAN_A, "callId": "call-0"}},
    ]
    assert replay(result["todo_events"]) == result["todos"]
    (answer,) = tool_messages(result)
    assert answer.content == "Updated todo list: 1 pending, 1 in progress, 0 completed."
    assert (answer.status, answer.name, answer.tool_call_id) == ("success", "todo_write", "call-0")
    assert result["messages"][-1].content == "planned"


def test_the_state_plan_is_a_copy_of_the_recorded_event() -> None:
    _, agent = agent_with([tool_calls(todo_write_call(PLAN_A)), AIMessage("planned")])
    result = sync_run(agent, "fix it")
    result["todos"][0]["content"] = "rewritten by a reader"
    assert result["todo_events"][1]["data"]["todos"] == PLAN_A


REFUSED = [
    {"todos": PLAN_A, "merge": True},
    {"todos": [todo("Ship", "done")]},
    {"todos": [todo("A", "in_progress"), todo("B", "in_progress")]},
    {"todos": [todo("A"), todo("A")]},
    {"todos": "not a list"},
]


def core_text(args: Any, *, parallel: bool = False) -> str:
    """What the core API answers the same call: the text the model must read."""
    return todo_write_tool(allow_parallel_in_progress=parallel).call(args, MemorySession())


@pytest.mark.parametrize("args", REFUSED)
def test_a_refused_call_is_an_error_tool_message_with_exactly_the_model_text(
    run: Run, args: dict[str, Any]
) -> None:
    _, agent = agent_with([tool_calls(("todo_write", args)), AIMessage("sorry")])
    result = run(agent, "plan")
    (answer,) = tool_messages(result)
    assert answer.content.startswith("Error: invalid todo")
    assert (answer.content, answer.status) == (core_text(args), "error")
    assert result["todos"] is None
    assert [event["type"] for event in result["todo_events"]] == ["turn/start"]


def test_several_in_progress_are_accepted_when_parallel_work_is_allowed(run: Run) -> None:
    plan = [todo("Fetch", "in_progress"), todo("Index", "in_progress")]
    _, agent = agent_with([tool_calls(todo_write_call(plan)), AIMessage("ok")], parallel=True)
    result = run(agent, "go")
    assert result["todos"] == plan
    assert tool_messages(result)[0].status == "success"


def test_two_writes_in_one_turn_record_both_and_the_last_wins(run: Run) -> None:
    _, agent = agent_with(
        [tool_calls(todo_write_call(PLAN_A), todo_write_call(PLAN_B)), AIMessage("ok")]
    )
    result = run(agent, "go")
    assert result["todos"] == PLAN_B
    writes = [event["data"]["todos"] for event in result["todo_events"][1:]]
    assert writes == [PLAN_A, PLAN_B]
    assert [m.tool_call_id for m in tool_messages(result)] == ["call-0", "call-1"]


def test_many_writes_in_one_turn_keep_call_order(run: Run) -> None:
    plans = [[todo(f"Step {index}", "in_progress")] for index in range(12)]
    _, agent = agent_with([tool_calls(*map(todo_write_call, plans)), AIMessage("ok")])
    result = run(agent, "go")
    assert [event["data"]["todos"] for event in result["todo_events"][1:]] == plans
    assert [event["seq"] for event in result["todo_events"]] == list(range(13))
    assert result["todos"] == plans[-1]


def test_a_refused_and_a_good_call_in_one_turn(run: Run) -> None:
    bad = ("todo_write", {"todos": [todo("")]})
    _, agent = agent_with([tool_calls(todo_write_call(PLAN_A), bad), AIMessage("ok")])
    result = run(agent, "go")
    assert result["todos"] == PLAN_A
    assert [m.status for m in tool_messages(result)] == ["success", "error"]
    assert len(result["todo_events"]) == 2


def test_other_tools_pass_through_untouched(run: Run) -> None:
    @tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    script = [tool_calls(("add", {"a": 2, "b": 3}), todo_write_call(PLAN_A)), AIMessage("5")]
    _, agent = agent_with(script, tools=[add])
    result = run(agent, "2+3")
    assert [m.content for m in tool_messages(result)] == [
        "5",
        "Updated todo list: 1 pending, 1 in progress, 0 completed.",
    ]


def test_a_new_run_is_a_new_turn_and_clears_the_plan(run: Run) -> None:
    script = [tool_calls(todo_write_call(PLAN_A)), AIMessage("planned"), AIMessage("hello again")]
    model, agent = agent_with(script, checkpointer=InMemorySaver())
    first = run(agent, "fix it", THREAD)
    assert first["todos"] == PLAN_A
    second = run(agent, "thanks", THREAD)
    assert second["todos"] is None
    assert second["todo_events"][-1] == {"seq": 2, "type": "turn/start", "data": {}}
    assert replay(second["todo_events"]) is None
    # The conversation itself carries on: the model saw the first turn.
    assert [m.content for m in model.requests[-1] if isinstance(m, HumanMessage)] == [
        "fix it",
        "thanks",
    ]


def test_the_plan_can_be_kept_across_turns_like_todolistmiddleware(run: Run) -> None:
    model = ScriptedChatModel(
        script=[tool_calls(todo_write_call(PLAN_A)), AIMessage("a"), AIMessage("b")]
    )
    middleware = TodoWriteMiddleware(allow_parallel_in_progress=False, clear_on_new_turn=False)
    agent = create_agent(model, middleware=[middleware], checkpointer=InMemorySaver())
    run(agent, "fix it", THREAD)
    second = run(agent, "thanks", THREAD)
    assert second["todos"] == PLAN_A
    assert [event["type"] for event in second["todo_events"]] == [EVENT_TYPE]


def test_todolistmiddleware_keeps_its_list_across_turns() -> None:
    """What the docs say about the middleware this one replaces, checked on the real one."""
    call = ("write_todos", {"todos": PLAN_A})
    model = ScriptedChatModel(script=[tool_calls(call), AIMessage("a"), AIMessage("b")])
    agent = create_agent(model, middleware=[TodoListMiddleware()], checkpointer=InMemorySaver())
    sync_run(agent, "fix it", THREAD)
    assert sync_run(agent, "thanks", THREAD)["todos"] == PLAN_A


def test_sqlite_checkpoints_persist_and_resume_the_plan_and_its_events(tmp_path: Path) -> None:
    database = tmp_path / "checkpoints.sqlite"
    with sqlite3.connect(database, check_same_thread=False) as connection:
        _, agent = agent_with(
            [tool_calls(todo_write_call(PLAN_A)), AIMessage("planned")],
            checkpointer=SqliteSaver(connection),
        )
        sync_run(agent, "fix it", THREAD)
    connection.close()
    # A new process would do this: a fresh saver and agent on the same database.
    with sqlite3.connect(database, check_same_thread=False) as connection:
        script = [tool_calls(todo_write_call(PLAN_B)), AIMessage("next")]
        _, agent = agent_with(script, checkpointer=SqliteSaver(connection))
        resumed = agent.get_state(THREAD).values
        assert resumed["todos"] == PLAN_A
        assert [event["seq"] for event in resumed["todo_events"]] == [0, 1]
        result = sync_run(agent, "go on", THREAD)
    connection.close()
    assert [(e["seq"], e["type"]) for e in result["todo_events"]] == [
        (0, "turn/start"),
        (1, EVENT_TYPE),
        (2, "turn/start"),
        (3, EVENT_TYPE),
    ]
    assert result["todos"] == PLAN_B


def test_async_sqlite_checkpoints_persist_and_resume(tmp_path: Path) -> None:
    database = str(tmp_path / "checkpoints.sqlite")

    async def session(script: list[AIMessage], text: str) -> tuple[Any, dict[str, Any]]:
        async with AsyncSqliteSaver.from_conn_string(database) as saver:
            _, agent = agent_with(script, checkpointer=saver)
            before = (await agent.aget_state(THREAD)).values
            after = await agent.ainvoke({"messages": [HumanMessage(text)]}, THREAD)
            return before, after

    _, first = asyncio.run(session([tool_calls(todo_write_call(PLAN_A)), AIMessage("a")], "fix it"))
    before, second = asyncio.run(session([AIMessage("b")], "thanks"))
    assert before["todos"] == first["todos"] == PLAN_A
    assert second["todos"] is None
    assert [e["type"] for e in second["todo_events"]] == ["turn/start", EVENT_TYPE, "turn/start"]


class FailingSaver(InMemorySaver):
    """A checkpointer whose disk fills up when it is asked to save a todo/write."""

    def __init__(self, where: str) -> None:
        super().__init__()
        self.where = where

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        events = checkpoint["channel_values"].get("todo_events", [])
        if self.where == "put" and any(e["type"] == EVENT_TYPE for e in events):
            raise OSError(28, "No space left on device")
        return super().put(config, checkpoint, metadata, new_versions)

    def put_writes(self, config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
        if self.where == "put_writes" and any(channel == "todo_events" for channel, _ in writes):
            raise OSError(28, "No space left on device")
        super().put_writes(config, writes, task_id, task_path)


@pytest.mark.parametrize("where", ["put", "put_writes"])
def test_a_failing_checkpointer_fails_the_run_and_never_splits_answer_from_event(
    where: str,
) -> None:
    _, agent = agent_with(
        [tool_calls(todo_write_call(PLAN_A)), AIMessage("planned")],
        checkpointer=FailingSaver(where),
    )
    with pytest.raises(OSError, match="No space left on device"):
        sync_run(agent, "fix it", THREAD)
    saved = agent.get_state(THREAD).values
    answered = [m for m in saved["messages"] if isinstance(m, ToolMessage)]
    recorded = [e for e in saved.get("todo_events", []) if e["type"] == EVENT_TYPE]
    assert len(answered) == len(recorded)  # both or neither, whatever was saved
    assert saved.get("todos") == (PLAN_A if recorded else None)


def test_the_tool_alone_refuses_to_run_outside_the_agent() -> None:
    (tool_object,) = TodoWriteMiddleware(allow_parallel_in_progress=False).tools
    with pytest.raises(UsageError, match=r"runs inside TodoWriteMiddleware's wrap_tool_call"):
        tool_object.invoke({"todos": PLAN_A})


def test_options_are_checked_when_the_middleware_is_built() -> None:
    with pytest.raises(UsageError, match="allowParallelInProgress"):
        TodoWriteMiddleware(allow_parallel_in_progress="yes")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="clear_on_new_turn must be a bool, not str"):
        TodoWriteMiddleware(
            allow_parallel_in_progress=False,
            clear_on_new_turn="no",  # type: ignore[arg-type]
        )
    middleware = TodoWriteMiddleware(allow_parallel_in_progress=True)
    assert middleware.allow_parallel_in_progress is True


def test_a_missing_framework_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "dsh_tool_todo.integrations.langchain")
    monkeypatch.setitem(sys.modules, "langchain.agents.middleware.types", None)
    with pytest.raises(MissingExtra, match=r"install dsh-tool-todo\[langchain\]") as raised:
        importlib.import_module("dsh_tool_todo.integrations.langchain")
    assert isinstance(raised.value, ImportError)
    assert "pip install '.[langchain]'" in str(raised.value)


def test_a_system_prompt_of_the_callers_own_is_passed_through_unchanged(run: Run) -> None:
    """As TodoListMiddleware does with its system_prompt=: appended to the agent's own."""
    prompt = "Plan with `todo_write` before you edit a file."
    alone = ScriptedChatModel(script=[AIMessage("ok")])
    middleware = TodoWriteMiddleware(allow_parallel_in_progress=False, system_prompt=prompt)
    run(create_agent(alone, middleware=[middleware]), "hi")
    (system,) = [m for m in alone.requests[0] if isinstance(m, SystemMessage)]
    assert system.text == prompt
    after = ScriptedChatModel(script=[AIMessage("ok")])
    run(create_agent(after, middleware=[middleware], system_prompt="Be brief."), "hi")
    (system,) = [m for m in after.requests[0] if isinstance(m, SystemMessage)]
    assert system.text == "Be brief.\n\n" + prompt


def test_the_migration_options_are_checked() -> None:
    with pytest.raises(UsageError, match="tool_description= is not accepted: the model reads"):
        TodoWriteMiddleware(allow_parallel_in_progress=False, tool_description="Track tasks.")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="system_prompt must be a str"):
        TodoWriteMiddleware(allow_parallel_in_progress=False, system_prompt=3)  # type: ignore[arg-type]


def test_without_a_system_prompt_no_model_call_is_wrapped() -> None:
    from langchain.agents.middleware.types import AgentMiddleware

    plain = TodoWriteMiddleware(allow_parallel_in_progress=False)
    assert type(plain).wrap_model_call is AgentMiddleware.wrap_model_call
    assert type(plain).awrap_model_call is AgentMiddleware.awrap_model_call
    prompted = TodoWriteMiddleware(allow_parallel_in_progress=False, system_prompt="Plan.")
    assert isinstance(prompted, TodoWriteMiddleware)
    assert prompted.name == plain.name == "TodoWriteMiddleware"


def test_a_call_id_seen_again_within_the_turn_with_the_same_list_records_once(run: Run) -> None:
    # The state is this adapter's log: the rule for a retried call is kept here.
    script = [
        tool_calls(todo_write_call(PLAN_A)),
        tool_calls(todo_write_call(PLAN_A)),  # call-0 again, the same list: a retried step
        tool_calls(
            todo_write_call(PLAN_B), todo_write_call(PLAN_B)
        ),  # call-0 with a new list: a new call; call-1
        AIMessage("ok"),
        tool_calls(todo_write_call(PLAN_A)),  # call-0 in the next turn: providers reuse ids
        AIMessage("ok"),
    ]
    _, agent = agent_with(script, checkpointer=InMemorySaver())
    first = run(agent, "fix it", THREAD)
    assert [m.content for m in tool_messages(first)] == [
        "Updated todo list: 1 pending, 1 in progress, 0 completed."
    ] * 2 + ["Updated todo list: 0 pending, 1 in progress, 1 completed."] * 2
    assert [event["data"] for event in first["todo_events"][1:]] == [
        {"todos": PLAN_A, "callId": "call-0"},
        {"todos": PLAN_B, "callId": "call-0"},
        {"todos": PLAN_B, "callId": "call-1"},
    ]
    assert first["todos"] == PLAN_B
    second = run(agent, "again", THREAD)
    assert [event["data"] for event in second["todo_events"][4:]] == [
        {},
        {"todos": PLAN_A, "callId": "call-0"},
    ]
    assert second["todos"] == PLAN_A


def test_a_provider_numbering_ids_per_response_loses_no_update_within_a_turn(run: Run) -> None:
    # Each response's first call is call-0: the model's progress updates in one turn are
    # new calls, and each acknowledged list must be the plan, never the turn's first one.
    script = [
        tool_calls(todo_write_call(PLAN_A)),
        tool_calls(todo_write_call(PLAN_B)),  # call-0 again, the next step done
        tool_calls(todo_write_call(PLAN_A), todo_write_call(PLAN_B)),  # call-0 and call-1
        tool_calls(
            todo_write_call(PLAN_A)
        ),  # call-0 with call-0's list, but call-1's came after it
        AIMessage("ok"),
    ]
    _, agent = agent_with(script)
    result = run(agent, "fix it", THREAD)
    a_text = "Updated todo list: 1 pending, 1 in progress, 0 completed."
    b_text = "Updated todo list: 0 pending, 1 in progress, 1 completed."
    assert [m.content for m in tool_messages(result)] == [a_text, b_text, a_text, b_text, a_text]
    assert result["todos"] == PLAN_A  # the list the model was last told was recorded
    assert [event["data"].get("callId") for event in result["todo_events"][1:]] == [
        "call-0",
        "call-0",
        "call-0",
        "call-1",
        "call-0",
    ]
