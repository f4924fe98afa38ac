"""The ``todo_write`` tool: one core, two shells (sync and async), and failures kept apart."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pytest

from dsh_tool_todo import ToolCallRejected, ToolFailure, UsageError, todo_write_tool
from dsh_tool_todo.core import contract
from dsh_tool_todo.core.contract import EVENT_TYPE
from dsh_tool_todo.host import AsyncMemorySession, Host, HostAgent
from tests._builders import make_event, todo, todos
from tests.conftest import HostFactory

ARGS = todos(todo("a", "in_progress"), todo("b"))


@dataclass
class Call:
    agent: Any


class FailingSession:
    def append(self, type: str, data: Mapping[str, Any], /) -> None:
        raise OSError("disk full")


class AsyncFailingSession:
    async def append(self, type: str, data: Mapping[str, Any], /) -> None:
        raise OSError("disk full")


def test_async_path_awaits_a_coroutine_append(host: Host) -> None:
    session = AsyncMemorySession()
    agent = host.new_agent(session)
    text = asyncio.run(host.acall_tool("todo_write", ARGS, agent=agent))
    assert text == "Updated todo list: 1 pending, 1 in progress, 0 completed."
    assert session.events == [make_event(EVENT_TYPE, ARGS, seq=0)]
    assert host.projection(session, "todos") == ARGS["todos"]


def test_async_path_accepts_a_plain_session(host: Host, agent: HostAgent) -> None:
    assert asyncio.run(host.acall_tool("todo_write", ARGS, agent=agent)).startswith("Updated")
    assert len(agent.session.events) == 1


def test_async_path_rejects_like_the_sync_path(host: Host) -> None:
    agent = host.new_agent(AsyncMemorySession())
    bad = todos(todo("a"), todo("a"))
    assert asyncio.run(host.acall_tool("todo_write", bad, agent=agent)) == (
        host.call_tool("todo_write", bad, agent=agent)
    )
    assert asyncio.run(host.acall_tool("todo_write", ARGS, agent=None)) == (
        "Error: todo_write requires an owning agent session"
    )
    assert agent.session.events == []


def test_sync_path_refuses_a_coroutine_append_and_appends_nothing(host: Host) -> None:
    session = AsyncMemorySession()
    agent = host.new_agent(session)
    with pytest.raises(
        UsageError,
        match=r"append is asynchronous, so nothing was recorded: call `await tool.aexecute",
    ):
        host.call_tool("todo_write", ARGS, agent=agent)
    assert session.events == []  # and no "coroutine was never awaited" warning


def test_a_failing_append_is_a_tool_failure_not_a_model_error(host: Host) -> None:
    tool = host.tools["todo_write"]
    with pytest.raises(ToolFailure, match="todo/write could not be appended: disk full") as info:
        tool.execute(ARGS, Call(HostAgent(FailingSession())))
    assert isinstance(info.value.__cause__, OSError)
    assert not isinstance(info.value, ToolCallRejected)
    with pytest.raises(ToolFailure, match="disk full"):
        asyncio.run(tool.aexecute(ARGS, Call(HostAgent(AsyncFailingSession()))))


@pytest.mark.parametrize("session", [None, {}, "session", 42], ids=repr)
def test_a_session_without_append_is_the_programs_mistake_not_a_failure_to_record(
    session: Any,
) -> None:
    tool = todo_write_tool(allow_parallel_in_progress=False)
    said = r"^todo_write\.a?call\(args, session\): session is the session log .*MemorySession\(\)"
    with pytest.raises(UsageError, match=said):
        tool.call(ARGS, session)
    with pytest.raises(UsageError, match=said):
        asyncio.run(tool.acall(ARGS, session))


def test_a_rejected_call_never_reaches_the_session(host: Host) -> None:
    tool = host.tools["todo_write"]
    with pytest.raises(ToolCallRejected, match="duplicate content"):
        tool.execute(todos(todo("a"), todo("a")), Call(HostAgent(FailingSession())))


def test_model_text_of_a_rejection_is_its_message() -> None:
    error = ToolCallRejected("Error: x")
    assert error.model_text == str(error) == "Error: x"


def test_a_call_without_exec_context_has_no_owner(host: Host) -> None:
    with pytest.raises(ToolCallRejected, match="requires an owning agent session"):
        host.tools["todo_write"].execute(ARGS, None)


def test_fakes_fit_the_protocols_without_subclassing(host: Host) -> None:
    appended: list[tuple[str, Mapping[str, Any]]] = []

    class ListSession:
        def append(self, type: str, data: Mapping[str, Any], /) -> None:
            appended.append((type, data))

    result = host.tools["todo_write"].execute(ARGS, Call(HostAgent(ListSession())))
    assert appended == [(EVENT_TYPE, ARGS)]
    assert host.tools["todo_write"].render(result) == (
        "Updated todo list: 1 pending, 1 in progress, 0 completed."
    )


@pytest.mark.parametrize("parallel", [False, True])
@pytest.mark.parametrize("shape", ["json", "dict"])
def test_every_split_reads_as_the_contract_template(
    make_host: HostFactory, parallel: bool, shape: str
) -> None:
    """The hot path's text, remembered per split of the counts, is the contract's text for
    every split, past the number of splits a tool remembers, on both shells."""
    host = make_host(parallel=parallel)
    agent = host.new_agent()  # a plain session: both shells call it
    splits = [
        (pending, in_progress, completed)
        for total in range(19)
        for pending in range(total + 1)
        for in_progress in range(0, 1 + (total - pending if parallel else min(1, total - pending)))
        for completed in [total - pending - in_progress]
    ]
    for pending, in_progress, completed in splits * 2:  # the second round reads remembered texts
        statuses = ["pending"] * pending + ["in_progress"] * in_progress
        items = [todo(f"step {index}", status) for index, status in enumerate(statuses)]
        items += [todo(f"done {index}", "completed") for index in range(completed)]
        args: Any = todos(*items)
        if shape == "json":
            args = json.dumps(args)
        expected = contract.SUCCESS_TEXT.format(
            pending=pending, inProgress=in_progress, completed=completed
        )
        assert host.call_tool("todo_write", args, agent=agent) == expected
        assert asyncio.run(host.acall_tool("todo_write", args, agent=agent)) == expected
    assert len(host.tools["todo_write"]._texts) <= 1024  # remembered, within a bound


def test_a_raw_call_the_shortcut_leaves_is_decoded_by_it_once(
    host: Host, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dsh_tool_todo.core import _accept

    tried: list[object] = []

    def counting(raw: Any, allow_parallel: bool) -> Any:
        tried.append(raw)
        return _accept.accept_counted(raw, allow_parallel)

    monkeypatch.setattr("dsh_tool_todo.core.tool.accept_counted", counting)
    monkeypatch.setattr("dsh_tool_todo.core._validation.accept_counted", counting)
    agent = host.new_agent()
    status_first = json.dumps({"todos": [{"status": "pending", "content": "a"}]})
    blank = json.dumps(todos(todo(" ")))
    assert host.call_tool("todo_write", status_first, agent=agent).startswith("Updated")
    assert host.call_tool("todo_write", blank, agent=agent).startswith("Error: ")
    assert tried == [status_first, blank]
