"""TodoWriteMiddleware with ``owners=``: what the graph state records is also in the owner's log.

The state stays the record the graph runs on; these tests read the copy back the way
the viewers do (``stores.current_plan``, the JSONL log) after real ``create_agent`` runs.
"""

from __future__ import annotations

import asyncio
import logging
import re
import shutil
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import psycopg
import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from dsh_tool_todo import UsageError, todo_write_tool
from dsh_tool_todo.core.contract import EVENT_TYPE, NOT_RECORDED, TURN_START
from dsh_tool_todo.errors import ToolFailure
from dsh_tool_todo.integrations.langchain import TodoWriteMiddleware
from dsh_tool_todo.stores import current_plan
from dsh_tool_todo.stores.jsonl import JsonlSession, read_events
from dsh_tool_todo.stores.memory import MemorySession
from dsh_tool_todo.stores.owners import OwnerRegistry, owner_file_name
from tests._builders import PLAN_A, PLAN_B
from tests.conftest import todo
from tests.integrations.scripted_langchain import ScriptedChatModel, todo_write_call, tool_calls
from tests.stores.conftest import pg_dsn as pg_dsn  # a database of the test's own

Run = Callable[..., dict[str, Any]]
TOOL = todo_write_tool(allow_parallel_in_progress=False)


def thread(key: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": key}}


@pytest.fixture(params=["invoke", "ainvoke"])
def run(request: pytest.FixtureRequest) -> Run:
    def invoke(agent: Any, text: str, config: Any = None) -> dict[str, Any]:
        message = {"messages": [HumanMessage(text)]}
        if request.param == "invoke":
            result: dict[str, Any] = agent.invoke(message, config)
        else:
            result = asyncio.run(agent.ainvoke(message, config))
        return result

    return invoke


@pytest.fixture
def middlewares() -> Iterator[list[TodoWriteMiddleware]]:
    """The middlewares a test builds: their registries are closed when it ends."""
    built: list[TodoWriteMiddleware] = []
    yield built
    for middleware in built:
        if middleware.owners is not None:
            middleware.owners.close()


@pytest.fixture
def agent_with(middlewares: list[TodoWriteMiddleware]) -> Callable[..., Any]:
    def build(script: list[AIMessage], *, checkpointer: Any = None, **options: Any) -> Any:
        middleware = TodoWriteMiddleware(allow_parallel_in_progress=False, **options)
        middlewares.append(middleware)
        model = ScriptedChatModel(script=script)
        return create_agent(model, middleware=[middleware], checkpointer=checkpointer)

    return build


def logged(path: Path) -> list[dict[str, Any]]:
    return [dict(event) for event in read_events(path)]


def test_a_run_with_owners_writes_the_state_log_to_the_threads_file(
    run: Run, agent_with: Callable[..., Any], tmp_path: Path
) -> None:
    script = [tool_calls(todo_write_call(PLAN_A)), AIMessage("planned")]
    result = run(agent_with(script, owners=tmp_path), "fix it", thread("t1"))
    assert result["todos"] == PLAN_A  # the state is still the record the graph runs on
    assert current_plan(tmp_path / "t1.jsonl") == PLAN_A
    assert logged(tmp_path / "t1.jsonl") == result["todo_events"]
    assert result["todo_events"][1]["data"]["callId"] == "call-0"


def test_each_thread_is_its_own_owner_and_a_run_without_one_is_the_default(
    run: Run, agent_with: Callable[..., Any], tmp_path: Path
) -> None:
    script = [
        tool_calls(todo_write_call(PLAN_A)),
        AIMessage("a"),
        tool_calls(todo_write_call(PLAN_B)),
        AIMessage("b"),
        tool_calls(todo_write_call(PLAN_B)),
        AIMessage("c"),
    ]
    agent = agent_with(script, owners=tmp_path)
    run(agent, "first", thread("ticket/42"))
    run(agent, "second", thread("ticket-7"))
    run(agent, "third")
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted(
        [owner_file_name("ticket/42"), "ticket-7.jsonl", "default.jsonl"]
    )
    assert current_plan(tmp_path / owner_file_name("ticket/42")) == PLAN_A
    assert current_plan(tmp_path / "ticket-7.jsonl") == PLAN_B


def test_a_new_run_on_the_thread_clears_the_logged_plan(
    run: Run, agent_with: Callable[..., Any], tmp_path: Path
) -> None:
    script = [tool_calls(todo_write_call(PLAN_A)), AIMessage("a"), AIMessage("b")]
    agent = agent_with(script, owners=tmp_path, checkpointer=InMemorySaver())
    run(agent, "fix it", thread("t1"))
    second = run(agent, "thanks", thread("t1"))
    assert current_plan(tmp_path / "t1.jsonl") is None
    assert logged(tmp_path / "t1.jsonl") == second["todo_events"]


def test_a_plan_kept_across_runs_logs_no_turn_start(
    run: Run, agent_with: Callable[..., Any], tmp_path: Path
) -> None:
    script = [tool_calls(todo_write_call(PLAN_A)), AIMessage("a"), AIMessage("b")]
    agent = agent_with(
        script, owners=tmp_path, checkpointer=InMemorySaver(), clear_on_new_turn=False
    )
    run(agent, "fix it", thread("t1"))
    run(agent, "thanks", thread("t1"))
    assert [event["type"] for event in logged(tmp_path / "t1.jsonl")] == [EVENT_TYPE]
    assert current_plan(tmp_path / "t1.jsonl") == PLAN_A


def test_the_variable_names_the_place_when_owners_is_left_out(
    run: Run,
    agent_with: Callable[..., Any],
    middlewares: list[TodoWriteMiddleware],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DSH_TODO_HOME", str(tmp_path / "home"))
    script = [tool_calls(todo_write_call(PLAN_A)), AIMessage("planned")]
    result = run(agent_with(script), "fix it", thread("t1"))
    assert middlewares[0].owners is not None
    assert middlewares[0].owners.directory == tmp_path / "home"
    assert logged(tmp_path / "home" / "t1.jsonl") == result["todo_events"]


def test_with_no_owners_and_no_variable_nothing_is_written_anywhere(
    run: Run,
    agent_with: Callable[..., Any],
    middlewares: list[TodoWriteMiddleware],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # every place a default could point at is under tmp_path
    for variable in ("HOME", "XDG_STATE_HOME", "LOCALAPPDATA"):
        monkeypatch.setenv(variable, str(tmp_path / variable))
    monkeypatch.chdir(tmp_path)
    script = [tool_calls(todo_write_call(PLAN_A)), AIMessage("planned")]
    result = run(agent_with(script), "fix it", thread("t1"))
    assert result["todos"] == PLAN_A
    assert middlewares[0].owners is None
    assert list(tmp_path.iterdir()) == []


def test_a_log_opened_from_a_directory_is_free_between_calls_for_another_writer(
    run: Run, agent_with: Callable[..., Any], middlewares: list[TodoWriteMiddleware], tmp_path: Path
) -> None:
    # another process serving the same thread (a second worker) writes the same log
    script = [tool_calls(todo_write_call(PLAN_A)), AIMessage("a"), AIMessage("b")]
    agent = agent_with(script, owners=tmp_path)
    run(agent, "fix it", thread("t1"))
    with JsonlSession(tmp_path / "t1.jsonl") as other:
        other.append(EVENT_TYPE, {"todos": PLAN_B})
    run(agent, "thanks", thread("t1"))
    assert [event["type"] for event in logged(tmp_path / "t1.jsonl")] == [
        TURN_START,
        EVENT_TYPE,
        EVENT_TYPE,
        TURN_START,
    ]
    mine = OwnerRegistry(tmp_path / "mine")  # a registry of one's own stays as its owner left it
    run(agent_with([tool_calls(todo_write_call(PLAN_A)), AIMessage("a")], owners=mine), "go")
    assert mine.owners() == ["default"]
    mine.close()


def test_a_retried_step_is_logged_once(
    run: Run, agent_with: Callable[..., Any], tmp_path: Path
) -> None:
    script = [
        tool_calls(todo_write_call(PLAN_A)),
        tool_calls(todo_write_call(PLAN_A)),  # call-0 again, the same list: a retried step
        AIMessage("ok"),
    ]
    result = run(agent_with(script, owners=tmp_path), "fix it", thread("t1"))
    assert [m.status for m in result["messages"] if isinstance(m, ToolMessage)] == ["success"] * 2
    assert logged(tmp_path / "t1.jsonl") == result["todo_events"]
    assert [event["type"] for event in result["todo_events"]] == [TURN_START, EVENT_TYPE]


class LosingSaver(InMemorySaver):
    """A checkpointer that loses the first step holding a todo/write (a crash after the call)."""

    lost = False

    def put_writes(self, config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
        if not self.lost and any(channel == "todo_events" for channel, _ in writes):
            self.lost = True
            raise OSError(5, "Input/output error")
        super().put_writes(config, writes, task_id, task_path)


def test_a_step_run_again_after_its_state_was_lost_is_logged_once(
    agent_with: Callable[..., Any], tmp_path: Path
) -> None:
    script = [tool_calls(todo_write_call(PLAN_A)), AIMessage("planned")]
    agent = agent_with(script, owners=tmp_path, checkpointer=LosingSaver())
    with pytest.raises(OSError, match="Input/output error"):
        agent.invoke({"messages": [HumanMessage("fix it")]}, thread("t1"))
    assert current_plan(tmp_path / "t1.jsonl") == PLAN_A  # copied before the state was lost
    result = agent.invoke(None, thread("t1"))  # the tools step runs again, same call id
    assert result["todos"] == PLAN_A
    assert logged(tmp_path / "t1.jsonl") == result["todo_events"]


def test_several_calls_in_one_message_are_logged_in_the_models_order(
    run: Run, agent_with: Callable[..., Any], tmp_path: Path
) -> None:
    # LangChain runs them side by side (threads under invoke): the log follows call order
    plans = [[todo(f"Step {index}", "in_progress")] for index in range(12)]
    bad = ("todo_write", {"todos": [todo("")]})
    script = [tool_calls(*map(todo_write_call, plans[:6]), bad, *map(todo_write_call, plans[6:]))]
    result = run(agent_with([*script, AIMessage("ok")], owners=tmp_path), "go", thread("t1"))
    assert logged(tmp_path / "t1.jsonl") == result["todo_events"]
    assert current_plan(tmp_path / "t1.jsonl") == plans[-1]


def test_a_provider_reusing_ids_in_a_turn_leaves_the_log_on_the_states_plan(
    run: Run, agent_with: Callable[..., Any], tmp_path: Path
) -> None:
    # call-0 A, call-0 B, call-0 A: a store takes the third for a retry of the first, so it
    # is copied without its id, and the log's plan is the one the model was last told
    script = [
        tool_calls(todo_write_call(PLAN_A)),
        tool_calls(todo_write_call(PLAN_B)),
        tool_calls(todo_write_call(PLAN_A)),
        AIMessage("ok"),
    ]
    result = run(agent_with(script, owners=tmp_path), "go", thread("t1"))
    assert result["todos"] == PLAN_A
    assert current_plan(tmp_path / "t1.jsonl") == PLAN_A
    assert [event["data"].get("callId") for event in logged(tmp_path / "t1.jsonl")] == [
        None,  # turn/start
        "call-0",
        "call-0",
        None,
    ]


class BrokenSession(MemorySession):
    """A store whose disk is full: ``turn/start`` fits, a ``todo/write`` does not (or none)."""

    def __init__(self, refused: tuple[str, ...]) -> None:
        super().__init__()
        self.refused = refused

    def append(self, type: str, data: Mapping[str, Any], /) -> Any:
        if type in self.refused:
            raise OSError(28, "No space left on device")
        return super().append(type, data)


def broken(*refused: str) -> OwnerRegistry:
    return OwnerRegistry(open_session=lambda key: BrokenSession(refused))


def test_a_call_whose_copy_fails_is_answered_not_recorded_and_recorded_nowhere(
    run: Run, agent_with: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    script = [tool_calls(todo_write_call(PLAN_A)), AIMessage("sorry")]
    with caplog.at_level(logging.ERROR, logger="dsh_tool_todo"):
        result = run(agent_with(script, owners=broken(EVENT_TYPE)), "fix it", thread("t1"))
    (answer,) = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    assert (answer.content, answer.status) == (NOT_RECORDED, "error")
    assert result["todos"] is None
    assert [event["type"] for event in result["todo_events"]] == [TURN_START]
    assert "todo_write for owner 't1' was not recorded" in caplog.text
    assert "No space left on device" in caplog.text


def test_a_failing_copy_of_an_earlier_call_in_the_message_fails_the_later_ones(
    run: Run, agent_with: Callable[..., Any]
) -> None:
    script = [tool_calls(todo_write_call(PLAN_A), todo_write_call(PLAN_B)), AIMessage("sorry")]
    result = run(agent_with(script, owners=broken(EVENT_TYPE)), "go", thread("t1"))
    answers = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    assert [(m.content, m.status) for m in answers] == [(NOT_RECORDED, "error")] * 2
    assert result["todos"] is None


def test_a_turn_start_that_cannot_be_copied_fails_the_run_before_the_model_is_called(
    run: Run, agent_with: Callable[..., Any]
) -> None:
    model_script = [AIMessage("never sent")]
    agent = agent_with(model_script, owners=broken(TURN_START))
    with pytest.raises(OSError, match="No space left on device"):
        run(agent, "fix it", thread("t1"))
    assert model_script == [AIMessage("never sent")]


def test_an_owner_registry_of_ones_own_is_used_as_given(
    run: Run, agent_with: Callable[..., Any]
) -> None:
    owners = OwnerRegistry()  # in memory: a host reading the plans itself
    script = [tool_calls(todo_write_call(PLAN_A)), AIMessage("planned")]
    result = run(agent_with(script, owners=owners), "fix it", thread("t1"))
    recorded = owners.session("t1").latest([EVENT_TYPE])
    assert recorded is not None
    assert recorded["data"] == result["todo_events"][-1]["data"]


@pytest.mark.parametrize(
    ("owners", "said"),
    [
        ("", r"^TodoWriteMiddleware: owners= is empty: name a directory"),
        (5, r"^TodoWriteMiddleware: owners= takes where the plans are kept: .* not int 5"),
        (OwnerRegistry, r"the class OwnerRegistry itself \(pass an instance\)"),
        (MemorySession(), r"not MemorySession"),
    ],
)
def test_a_wrong_owners_is_refused_when_the_middleware_is_built(owners: Any, said: str) -> None:
    with pytest.raises(UsageError, match=said):
        TodoWriteMiddleware(allow_parallel_in_progress=False, owners=owners)


def test_owners_may_be_a_postgresql_url(
    run: Run, agent_with: Callable[..., Any], pg_dsn: str
) -> None:
    params = psycopg.conninfo.conninfo_to_dict(pg_dsn)
    url = "postgresql://{}@{}:{}/{}".format(
        params.get("user", "postgres"),
        params.get("host", "127.0.0.1"),
        params.get("port", 5432),
        params["dbname"],
    )
    script = [tool_calls(todo_write_call(PLAN_A), todo_write_call(PLAN_B)), AIMessage("ok")]
    result = run(agent_with(script, owners=url), "go", thread("ticket-42"))
    assert result["todos"] == PLAN_B
    assert current_plan(url, "ticket-42") == PLAN_B


# --- a thread's session that cannot be opened --------------------------------------------


def test_a_threads_log_another_writer_holds_is_answered_not_recorded_with_the_cause_logged(
    run: Run, agent_with: Callable[..., Any], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    script = [tool_calls(todo_write_call(PLAN_A)), AIMessage("sorry")]
    agent = agent_with(script, owners=tmp_path, clear_on_new_turn=False)
    with OwnerRegistry(tmp_path) as holder:  # another process serving the same thread
        holder.call("t1", TOOL, {"todos": PLAN_B})
        with caplog.at_level(logging.ERROR, logger="dsh_tool_todo"):
            result = run(agent, "fix it", thread("t1"))
    (answer,) = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    assert (answer.content, answer.status) == (NOT_RECORDED, "error")
    assert result.get("todos") is None
    (record,) = caplog.records
    assert "todo_write for owner 't1' was not recorded: owner 't1': its session could not be " in (
        record.getMessage()
    )
    assert "t1.jsonl: another session is writing this log" in record.getMessage()
    assert current_plan(tmp_path / "t1.jsonl") == PLAN_B  # the holder's, untouched


def test_a_threads_log_another_writer_holds_fails_the_run_at_its_turn_start(
    run: Run, agent_with: Callable[..., Any], tmp_path: Path
) -> None:
    model_script = [AIMessage("never sent")]
    agent = agent_with(model_script, owners=tmp_path)
    with OwnerRegistry(tmp_path) as holder:
        holder.call("t1", TOOL, {"todos": PLAN_B})
        with pytest.raises(
            ToolFailure,
            match=r"^owner 't1': its session could not be opened: .*t1\.jsonl: another session",
        ):
            run(agent, "fix it", thread("t1"))
    assert model_script == [AIMessage("never sent")]


def test_a_directory_made_a_file_mid_run_is_answered_not_recorded(
    run: Run, agent_with: Callable[..., Any], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    place = tmp_path / "plans"
    replies = [tool_calls(todo_write_call(PLAN_A)), tool_calls(todo_write_call(PLAN_B))]

    def model(messages: list[Any]) -> AIMessage:
        if len(replies) == 1:  # after the first call was recorded
            shutil.rmtree(place)
            place.write_text("a file now\n")
        return replies.pop(0) if replies else AIMessage("sorry")

    with caplog.at_level(logging.ERROR, logger="dsh_tool_todo"):
        result = run(agent_with(model, owners=place), "fix it", thread("t1"))
    answers = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    assert [m.status for m in answers] == ["success", "error"]
    assert answers[1].content == NOT_RECORDED
    assert result["todos"] == PLAN_A  # the state holds only what the log held
    assert "its session could not be opened: [Errno 17] File exists" in caplog.text


def test_a_database_out_of_reach_is_answered_not_recorded_with_the_cause_logged(
    run: Run,
    agent_with: Callable[..., Any],
    unreachable: OwnerRegistry,
    caplog: pytest.LogCaptureFixture,
) -> None:
    script = [tool_calls(todo_write_call(PLAN_A)), AIMessage("sorry")]
    agent = agent_with(script, owners=unreachable, clear_on_new_turn=False)
    with caplog.at_level(logging.ERROR, logger="dsh_tool_todo"):
        result = run(agent, "fix it", thread("t1"))
    (answer,) = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    assert (answer.content, answer.status) == (NOT_RECORDED, "error")
    (record,) = [r for r in caplog.records if r.name == "dsh_tool_todo"]
    assert re.search(r"its session could not be opened: .*127\.0\.0\.1:1/none", record.getMessage())
