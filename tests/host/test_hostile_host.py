"""Hostile-input tests for the host side: composition, the reference host, the async path.

One test (or a few) per finding of the hardening issue that concerns the host half:
3, 11, 15, 17-20. Each was written to fail on the code before its fix. The others live with
their modules: 5 in tests/plans/test_forwarding.py, 21 and 22 in test_loader.py, 23 in
tests/core/test_options.py, 24 in tests/plans/test_reminder.py.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import types
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pluggy
import pytest

import dsh_tool_todo
from dsh_tool_todo import InvalidLog, TodosProjection, UsageError, replay
from dsh_tool_todo.core.contract import EVENT_TYPE, TURN_START
from dsh_tool_todo.core.markers import hookimpl
from dsh_tool_todo.core.projection import PLAN_EVENTS
from dsh_tool_todo.errors import AppendOutcomeUnknown
from dsh_tool_todo.host._host import (
    AsyncMemorySession,
    Host,
    HostAgent,
    MemorySession,
    ProjectionTable,
    ToolTable,
)
from dsh_tool_todo.host.loader import load_plugins, new_plugin_manager
from dsh_tool_todo.plans.reminder import plan_reminder
from tests._builders import PLAN, options, todo, todo_write, todos, turn_start

ARGS = todos(todo("a", "in_progress"), todo("b"))


def _call(host: Host, agent: HostAgent, args: Any = ARGS) -> str:
    return host.call_tool("todo_write", args, agent=agent)


# ---- 3: a listener that raises never fails a recorded call ------------------------


def test_3_a_raising_listener_is_logged_and_the_call_succeeds(
    host: Host, agent: HostAgent, caplog: pytest.LogCaptureFixture
) -> None:
    heard: list[dict[str, Any]] = []

    def redraw(event: dict[str, Any]) -> None:
        raise RuntimeError("terminal gone")

    agent.session.subscribe(redraw)
    agent.session.subscribe(heard.append)  # runs after the failing one
    with caplog.at_level(logging.ERROR, logger="dsh_tool_todo"):
        assert _call(host, agent) == "Updated todo list: 1 pending, 1 in progress, 0 completed."
    assert heard == agent.session.events  # the remaining listener still ran
    assert host.projection(agent.session, "todos") == ARGS["todos"]
    (record,) = [r for r in caplog.records if r.name == "dsh_tool_todo"]
    assert "seq=0" in record.getMessage()
    assert "'todo/write'" in record.getMessage()
    assert record.exc_info is not None
    assert isinstance(record.exc_info[1], RuntimeError)


def test_3_a_listener_subscribed_before_the_host_does_not_hide_the_event(host: Host) -> None:
    session = MemorySession()

    def crash(event: dict[str, Any]) -> None:
        raise ZeroDivisionError

    session.subscribe(crash)  # subscribed before new_agent: runs first
    agent = host.new_agent(session)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(logging.getLogger("dsh_tool_todo"), "disabled", True)
        assert _call(host, agent).startswith("Updated")
    assert host.projection(session, "todos") == ARGS["todos"]


def test_3_a_unit_that_cannot_fold_an_event_reads_as_broken_until_a_later_write(
    host: Host, agent: HostAgent, caplog: pytest.LogCaptureFixture
) -> None:
    _call(host, agent)
    with caplog.at_level(logging.ERROR, logger="dsh_tool_todo"):
        event = agent.session.append(EVENT_TYPE, {"items": []})  # a host's malformed write
    assert event["seq"] == 1  # recorded: the append itself succeeds
    message = r"projection 'todos' could not fold event seq=1 type='todo/write'.*KeyError"
    with pytest.raises(InvalidLog, match=message):
        host.projection(agent.session, "todos")
    agent.session.append("turn/end", {})
    with pytest.raises(InvalidLog, match="until a later todo/write or turn/start"):
        host.projection(agent.session, "todos")
    assert any("could not fold event seq=1" in r.getMessage() for r in caplog.records)
    assert _call(host, agent, todos(todo("fixed"))).startswith("Updated")
    assert host.projection(agent.session, "todos") == [todo("fixed")]
    agent.session.append(EVENT_TYPE, None)  # broken again, then a turn/start fixes it
    agent.session.append(TURN_START, {})
    assert host.projection(agent.session, "todos") is None


# ---- 11: what is read back is a copy ----------------------------------------------


def test_11_mutating_the_projection_cannot_rewrite_the_log(host: Host, agent: HostAgent) -> None:
    _call(host, agent)
    view = host.projection(agent.session, "todos")
    view[0]["content"] = "Delete the production server"
    view.append(todo("b"))  # a duplicate content, had it reached the log
    assert host.projection(agent.session, "todos") == ARGS["todos"]
    assert replay(agent.session.events) == ARGS["todos"]


def test_11_mutating_a_result_cannot_rewrite_the_log(host: Host, agent: HostAgent) -> None:
    result = host.tools["todo_write"].execute(ARGS, agent.call)
    result["todos"][0]["content"] = "b"
    result["todos"].clear()
    assert agent.session.events[0]["data"]["todos"] == ARGS["todos"]
    assert host.projection(agent.session, "todos") == ARGS["todos"]
    assert replay(agent.session.events) == ARGS["todos"]

    async def main() -> None:
        session = AsyncMemorySession()
        owner = host.new_agent(session)
        result = await host.tools["todo_write"].aexecute(ARGS, owner.call)
        result["todos"][1]["status"] = "done"
        assert replay(session.events) == ARGS["todos"]

    asyncio.run(main())


# ---- 15, 19, 20: resume, one subscription, no late units --------------------------


def test_15_an_agent_opened_on_an_existing_log_starts_with_its_plan(host: Host) -> None:
    session = MemorySession()
    first = Host([dsh_tool_todo], options(False))
    _call(first, first.new_agent(session), todos(*PLAN))
    session.append("turn/end", {})
    restarted = host.new_agent(session)  # a new host process, say, on the same log
    assert host.projection(restarted.session, "todos") == PLAN
    assert plan_reminder(host.projection(session, "todos")) == plan_reminder(PLAN)
    session.append(TURN_START, {})
    assert host.projection(session, "todos") is None
    assert TodosProjection().resume(session.latest(PLAN_EVENTS)) is None


def test_15_an_invalid_last_write_found_at_open_raises(host: Host) -> None:
    session = MemorySession()
    session.append(EVENT_TYPE, todos(todo("a")))
    session.append(EVENT_TYPE, todos(todo("a"), todo("a")))
    with pytest.raises(InvalidLog, match=r"event 1: Error: invalid todos: duplicate content"):
        host.new_agent(session)
    with pytest.raises(UsageError, match="belongs to no agent"):
        host.projection(session, "todos")
    session.append(TURN_START, {})  # later events fix it: the agent opens
    assert host.projection(host.new_agent(session).session, "todos") is None


def test_15_the_memory_session_speaks_the_store_protocol() -> None:
    with MemorySession() as session:
        assert session.append(TURN_START, {}) == turn_start(seq=0)
        session.append(EVENT_TYPE, todos(todo("a")))
        session.append("turn/end", {})
        assert session.latest(PLAN_EVENTS)["seq"] == 1  # type: ignore[index]
        assert session.latest(("nothing",)) is None
        with pytest.raises(UsageError, match="collection of event types, not one string"):
            session.latest(EVENT_TYPE)
    with pytest.raises(UsageError, match="session log is closed"):
        session.append(TURN_START, {})
    assert [event["seq"] for event in session.events] == [0, 1, 2]


class _Counting:
    """A projection unit that counts the events it folds."""

    state_version = 1
    init = 0

    def apply(self, state: int, event: Mapping[str, Any]) -> int:
        return state + 1

    def view(self, state: int) -> int:
        return state


def _counting_plugin() -> types.ModuleType:
    plugin = types.ModuleType("counting_plugin")

    @hookimpl
    def apply(ctx: Any) -> None:
        ctx.session_projections.register("count", _Counting())

    plugin.apply = apply  # type: ignore[attr-defined]
    return plugin


def test_19_new_agent_twice_on_one_session_neither_resubscribes_nor_resets() -> None:
    host = Host([dsh_tool_todo, _counting_plugin()], options(False))
    session = MemorySession()
    first = host.new_agent(session)
    _call(host, first)
    second = host.new_agent(session)
    assert host.projection(second.session, "todos") == ARGS["todos"]
    _call(host, second)
    assert host.projection(session, "count") == 2  # each event folded once


class _Recording(_Counting):
    """A counting unit that also records the seq of each event it folds."""

    def __init__(self) -> None:
        self.folded: list[int] = []

    def apply(self, state: int, event: Mapping[str, Any]) -> int:
        self.folded.append(event["seq"])
        return state + 1


def _recording_host() -> tuple[Host, _Recording]:
    unit = _Recording()
    plugin = types.ModuleType("recording_plugin")

    @hookimpl
    def apply(ctx: Any) -> None:
        ctx.session_projections.register("count", unit)

    plugin.apply = apply  # type: ignore[attr-defined]
    return Host([dsh_tool_todo, plugin], options(False)), unit


def test_a_session_the_host_made_is_folded_when_read_each_event_once() -> None:
    host, unit = _recording_host()
    agent = host.new_agent(parent="lead")  # its link event is no unit's to fold
    for _ in range(3):
        _call(host, agent)
    assert unit.folded == []  # nothing folded per append: the log is the session's own list
    assert host.projection(agent.session, "count") == 3
    assert host.projection(agent.session, "todos") == ARGS["todos"]
    assert unit.folded == [1, 2, 3]  # once each, in log order, however often read
    agent.session.events.clear()  # emptied by its owner: what comes after still folds
    _call(host, agent, todos(todo("later")))
    assert host.projection(agent.session, "todos") == [todo("later")]
    assert unit.folded == [1, 2, 3, 4]


def test_a_session_the_host_made_shares_its_states_and_another_host_has_its_own() -> None:
    host, unit = _recording_host()
    first = host.new_agent()
    _call(host, first)
    second = host.new_agent(first.session)  # the same host: the same states, not reset
    _call(host, second)
    assert host.projection(first.session, "count") == 2
    assert unit.folded == [0, 1]  # each event folded once
    other, other_unit = _recording_host()
    other.new_agent(first.session)  # resumed: the plan, and only later events counted
    assert other.projection(first.session, "todos") == ARGS["todos"]
    _call(other, other.new_agent(first.session))
    assert other.projection(first.session, "count") == 1
    assert other_unit.folded == [2]
    assert host.projection(first.session, "count") == 3
    with pytest.raises(UsageError, match="belongs to no agent of this host"):
        other.projection(host.new_agent().session, "todos")


def test_a_listener_on_a_session_the_host_made_reads_the_plan_it_was_called_for() -> None:
    host, _ = _recording_host()
    agent = host.new_agent()
    seen: list[Any] = []
    agent.session.subscribe(lambda event: seen.append(host.projection(agent.session, "todos")))
    _call(host, agent)
    _call(host, agent, todos(todo("next")))
    assert seen == [ARGS["todos"], [todo("next")]]


def test_readers_and_writers_on_a_session_the_host_made_fold_each_event_once() -> None:
    host, unit = _recording_host()
    agent = host.new_agent()
    start = threading.Barrier(4)

    def write() -> None:
        start.wait()
        for _ in range(200):
            _call(host, agent)

    def read() -> None:
        start.wait()
        for _ in range(200):
            host.projection(agent.session, "count")

    threads = [threading.Thread(target=job) for job in (write, write, read, read)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert host.projection(agent.session, "count") == 400
    assert unit.folded == list(range(400))


def test_20_a_unit_registered_after_composition_is_refused(host: Host, agent: HostAgent) -> None:
    registry = host.context.session_projections
    assert registry is not None
    with pytest.raises(UsageError, match=r"projection 'count' registered after composition"):
        registry.register("count", _Counting())
    registry["sneaked"] = _Counting()  # past the registry's own method
    assert _call(host, agent).startswith("Updated")  # never a failed call for a recorded event
    assert host.projection(agent.session, "todos") == ARGS["todos"]
    with pytest.raises(UsageError, match=r"'sneaked' was added after this agent was made"):
        host.projection(agent.session, "sneaked")


# ---- 17: a failed composition changes nothing ---------------------------------------


@dataclass
class _Ctx:
    tools: Any
    options: Any
    session_projections: Any


def _compose(ctx: Any) -> pluggy.PluginManager:
    manager = new_plugin_manager()
    load_plugins(manager, [dsh_tool_todo], ctx)
    return manager


@pytest.mark.parametrize(
    ("plugin_options", "message"),
    [
        ({}, r"options for dsh-tool-todo are missing"),
        ({"dsh-tool-todo": {}}, r"allowParallelInProgress is required"),
        ({"dsh-tool-todo": {"allowParallelInProgress": "yes"}}, r"must be a bool"),
        (None, r"ctx.options must be a mapping of plugin name to options, not NoneType"),
        ([("dsh-tool-todo", {})], r"ctx.options must be a mapping .*, not list"),
        ("dsh-tool-todo", r"ctx.options must be a mapping .*, not str"),
    ],
)
def test_17_bad_options_register_nothing(plugin_options: Any, message: str) -> None:
    ctx = _Ctx(ToolTable(), plugin_options, ProjectionTable())
    manager = new_plugin_manager()
    with pytest.raises(UsageError, match=message):
        load_plugins(manager, [dsh_tool_todo], ctx)
    assert (dict(ctx.tools), dict(ctx.session_projections)) == ({}, {})
    assert manager.get_plugins() == set()  # the manager is as it was, too


class _RaisingTools:
    def register(self, tool: Any, /) -> None:
        raise RuntimeError("registry offline")


class _NoRegister:
    pass


@pytest.mark.parametrize(
    ("tools", "message"),
    [
        (_RaisingTools(), r"ctx.tools.register raised RuntimeError: registry offline"),
        (_NoRegister(), r"ctx.tools has no register\(tool\) method"),
        (None, r"ctx.tools has no register\(tool\) method"),
    ],
)
def test_17_a_broken_tools_registry_registers_nothing(tools: Any, message: str) -> None:
    ctx = _Ctx(tools, options(False), ProjectionTable())
    with pytest.raises(UsageError, match=message):
        _compose(ctx)
    assert dict(ctx.session_projections) == {}


def test_17_a_context_without_tools_or_with_a_bad_projection_registry() -> None:
    class Bare:
        options = options(False)

    with pytest.raises(UsageError, match=r"the plugin context has no `tools`"):
        _compose(Bare())

    class Offline:
        options = options(False)
        session_projections = None

        @property
        def tools(self) -> Any:
            raise RuntimeError("registry offline")

    with pytest.raises(
        UsageError, match=r"reading ctx.tools raised RuntimeError: registry offline"
    ):
        _compose(Offline())
    ctx = _Ctx(ToolTable(), options(False), "not a registry")
    with pytest.raises(UsageError, match=r"ctx.session_projections must be None or have"):
        _compose(ctx)
    assert dict(ctx.tools) == {}


# ---- 18: "nothing was recorded" only when certain ---------------------------------


class _TaskSession(MemorySession):
    """Records at once and returns an awaitable, as a session wrapping a Task might."""

    def append(self, type: str, data: Mapping[str, Any], /) -> Any:
        super().append(type, data)
        return _Done()


class _Done:
    def __await__(self) -> Iterator[None]:
        return iter(())


class _RecordingCoroutineSession(MemorySession):
    """A plain function that records, then hands back a coroutine."""

    def append(self, type: str, data: Mapping[str, Any], /) -> Any:
        super().append(type, data)
        return asyncio.sleep(0)


class _GeneratorSession(MemorySession):
    def append(self, type: str, data: Mapping[str, Any], /) -> Any:
        super().append(type, data)
        yield None


class _AsyncGeneratorSession(MemorySession):
    async def append(self, type: str, data: Mapping[str, Any], /) -> Any:
        super().append(type, data)
        yield None


@pytest.mark.parametrize(
    ("session_type", "error", "said", "recorded"),
    [
        (_TaskSession, AppendOutcomeUnknown, r"the event may have been recorded", 1),
        (_RecordingCoroutineSession, AppendOutcomeUnknown, r"the event may have been recorded", 1),
        (_GeneratorSession, UsageError, r"generator function .* so nothing was recorded", 0),
        (_AsyncGeneratorSession, UsageError, r"generator function .* so nothing was recorded", 0),
    ],
)
def test_18_nothing_was_recorded_is_said_only_when_certain(
    host: Host, session_type: type[MemorySession], error: type[Exception], said: str, recorded: int
) -> None:
    session = session_type()
    agent = host.new_agent(session)
    with pytest.raises(error, match=said):
        _call(host, agent)
    assert len(session.events) == recorded  # 1: a retry would record it twice


def test_18_a_task_append_on_a_running_loop(host: Host) -> None:
    class LoopSession(MemorySession):
        def append(self, type: str, data: Mapping[str, Any], /) -> Any:
            return asyncio.get_running_loop().create_task(self._later(type, data))

        async def _later(self, type: str, data: Mapping[str, Any]) -> None:
            MemorySession.append(self, type, data)

    async def main() -> LoopSession:
        session = LoopSession()
        agent = host.new_agent(session)
        with pytest.raises(AppendOutcomeUnknown, match=r"_asyncio.Task, an awaitable that may"):
            _call(host, agent)
        await asyncio.sleep(0)
        return session

    assert len(asyncio.run(main()).events) == 1


@pytest.mark.parametrize("session_type", [_GeneratorSession, _AsyncGeneratorSession])
def test_18_a_generator_append_is_refused_on_the_async_path_too(
    host: Host, session_type: type[MemorySession]
) -> None:
    agent = host.new_agent(session_type())
    with pytest.raises(UsageError, match=r"generator function .* so nothing was recorded"):
        asyncio.run(host.acall_tool("todo_write", ARGS, agent=agent))
    assert agent.session.events == []


def test_15_a_restarted_agent_on_a_jsonl_log_continues_its_plan(tmp_path: Path) -> None:
    from dsh_tool_todo.stores.jsonl import JsonlSession

    path = tmp_path / "agent.jsonl"
    before = Host([dsh_tool_todo], options(False))
    with JsonlSession(path) as session:
        _call(before, before.new_agent(session), todos(*PLAN))
        session.append("turn/end", {})
    after = Host([dsh_tool_todo], options(False))  # a restarted host process
    with JsonlSession(path) as session:
        after.new_agent(session)
        assert after.projection(session, "todos") == PLAN
        assert plan_reminder(after.projection(session, "todos")) == plan_reminder(PLAN)
    with path.open("a", encoding="utf-8") as log:  # another program appends a broken write
        log.write(json.dumps(todo_write(todo(""), seq=2)) + "\n")
    broken = r"event 2: Error: invalid todo: `content` must be"
    with JsonlSession(path) as session, pytest.raises(InvalidLog, match=broken):
        Host([dsh_tool_todo], options(False)).new_agent(session)


@pytest.mark.parametrize(
    "change",
    [
        lambda registry, unit: registry.__setitem__("count", unit),
        lambda registry, unit: registry.update(count=unit),
        lambda registry, unit: registry.update({"count": unit}),
        lambda registry, unit: registry.setdefault("count", unit),
        lambda registry, unit: registry.__ior__({"count": unit}),
    ],
)
def test_every_way_past_the_registry_reaches_the_next_agent(
    host: Host, change: Callable[[Any, Any], object]
) -> None:
    registry = host.context.session_projections
    assert registry is not None
    before = host.new_agent()
    change(registry, _Counting())
    after = host.new_agent()
    _call(host, after)
    assert host.projection(after.session, "count") == 1
    with pytest.raises(UsageError, match=r"'count' was added after this agent was made"):
        host.projection(before.session, "count")


@pytest.mark.parametrize(
    "remove",
    [
        lambda registry: registry.__delitem__("count"),
        lambda registry: registry.pop("count"),
        lambda registry: registry.popitem(),  # the newest: "count"
        lambda registry: registry.clear(),
    ],
)
def test_a_unit_removed_past_the_registry_folds_nothing_for_the_next_agent(
    host: Host, remove: Callable[[Any], object]
) -> None:
    registry = host.context.session_projections
    assert registry is not None
    unit = _Recording()
    registry["count"] = unit
    host.new_agent()  # made with "count"
    remove(registry)
    if "todos" not in registry:  # put back past every method, so only remove() was seen
        dict.__setitem__(registry, "todos", TodosProjection())
    agent = host.new_agent()
    _call(host, agent)
    assert host.projection(agent.session, "todos") == ARGS["todos"]
    assert unit.folded == []


def test_a_unit_swapped_in_past_the_registry_is_never_compared(host: Host) -> None:
    class Uncomparable(_Counting):
        def __eq__(self, other: object) -> bool:
            raise AssertionError("the host compared two units")

        __hash__ = object.__hash__

    registry = host.context.session_projections
    assert registry is not None
    registry["count"] = Uncomparable()  # past the registry's own method
    host.new_agent()
    registry["count"] = Uncomparable()  # a different unit under the same key
    agent = host.new_agent()
    assert _call(host, agent).startswith("Updated")
    assert host.projection(agent.session, "count") == 1
