"""The `todos` projection unit and the replay of a whole log."""

from __future__ import annotations

import pytest

import dsh_tool_todo
from dsh_tool_todo import InvalidLog, TodosProjection, replay
from dsh_tool_todo.core.contract import EVENT_TYPE, TURN_START
from dsh_tool_todo.host import Host, HostAgent
from tests._builders import make_event, options, todo, todo_write, todos, turn_start
from tests.conftest import HostFactory

TURN_END = make_event("turn/end")


def test_unit_shape() -> None:
    unit = TodosProjection()
    assert unit.init is None
    assert unit.state_version == 2
    state = [todo("a")]
    assert unit.view(state) is state


def test_a_write_takes_the_whole_list() -> None:
    unit = TodosProjection()
    written = todo_write(todo("a"), todo("b", "completed"))
    assert unit.apply([todo("old")], written) is written["data"]["todos"]


def test_turn_start_clears_the_plan() -> None:
    assert TodosProjection().apply([todo("a")], turn_start()) is None


@pytest.mark.parametrize(
    "event", [TURN_END, make_event("message", {"text": "hi"}), make_event("x", None)]
)
def test_every_other_event_returns_the_same_state_object(event: dict[str, object]) -> None:
    state = [todo("a")]
    assert TodosProjection().apply(state, event) is state


def test_host_drives_the_projection_as_events_are_appended(host: Host, agent: HostAgent) -> None:
    assert host.projection(agent.session, "todos") is None
    host.call_tool("todo_write", todos(todo("a", "in_progress")), agent=agent)
    assert host.projection(agent.session, "todos") == [todo("a", "in_progress")]
    agent.session.append("turn/end", {})
    assert host.projection(agent.session, "todos") == [todo("a", "in_progress")]
    agent.session.append(TURN_START, {})
    assert host.projection(agent.session, "todos") is None


def test_a_rejected_call_leaves_the_projection_alone(host: Host, agent: HostAgent) -> None:
    host.call_tool("todo_write", todos(todo("a")), agent=agent)
    before = host.projection(agent.session, "todos")
    host.call_tool("todo_write", todos(todo("")), agent=agent)
    assert host.projection(agent.session, "todos") == before  # a copy each read (finding 11)
    assert len(agent.session.events) == 1


def test_replay_last_write_wins_and_turn_start_clears() -> None:
    a, b, c = (todo_write(todo(content)) for content in "abc")
    assert replay([]) is None
    assert replay([a, b]) == [todo("b")]
    assert replay([a, turn_start()]) is None
    assert replay([a, turn_start(), TURN_END, c]) == [todo("c")]
    assert replay([a, TURN_END, make_event("other")]) == [todo("a")]


def test_replay_agrees_with_the_host(host: Host, agent: HostAgent) -> None:
    host.call_tool("todo_write", todos(todo("a", "in_progress")), agent=agent)
    agent.session.append(TURN_START, {})
    host.call_tool("todo_write", todos(todo("a", "completed"), todo("b")), agent=agent)
    agent.session.append("turn/end", {})
    assert replay(agent.session.events) == host.projection(agent.session, "todos")


def test_a_parallel_log_still_replays_after_the_option_is_tightened(
    make_host: HostFactory,
) -> None:
    parallel = make_host(parallel=True)
    agent = parallel.new_agent()
    both_active = todos(todo("a", "in_progress"), todo("b", "in_progress"))
    assert parallel.call_tool("todo_write", both_active, agent=agent).startswith("Updated")
    strict = make_host(parallel=False)
    assert strict.call_tool("todo_write", both_active, agent=strict.new_agent()).startswith("Error")
    assert replay(agent.session.events, verify=True) == both_active["todos"]


@pytest.mark.parametrize(
    ("event", "message"),
    [
        (todo_write(todo("a"), todo("a")), r"event 1: Error: invalid todos: duplicate content"),
        (todo_write(todo("")), r"event 1: Error: invalid todo: `content` must be a non-empty"),
        (todo_write({"content": "a", "status": "done"}), r"event 1: .*`status` must be one of"),
        (make_event(EVENT_TYPE, {"items": []}), r"event 1: todo/write data must be"),
        (make_event(EVENT_TYPE, None), r"event 1: todo/write data must be"),
    ],
)
def test_replay_refuses_a_log_that_breaks_the_invariant(
    event: dict[str, object], message: str
) -> None:
    with pytest.raises(InvalidLog, match=message):
        replay([todo_write(todo("fine")), event])
    replay([todo_write(todo("fine")), event][:1])


def test_replay_without_verify_only_folds() -> None:
    assert replay([todo_write(todo("a"), todo("a"))], verify=False) == [todo("a"), todo("a")]


def test_each_host_has_its_own_projection_registry() -> None:
    first = Host([dsh_tool_todo], options(False))
    second = Host([dsh_tool_todo], options(False))
    assert first.context.session_projections is not second.context.session_projections
