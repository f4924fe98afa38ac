"""The reference host, as host authors use it."""

from __future__ import annotations

import doctest
import sys
from typing import Any, ClassVar

import pytest

import dsh_tool_todo
from dsh_tool_todo import UsageError
from dsh_tool_todo import host as host_module
from dsh_tool_todo.host import Host, HostAgent, MemorySession
from tests._builders import todo, todos
from tests.conftest import HostFactory


def test_the_module_example_runs() -> None:
    assert doctest.testmod(host_module, raise_on_error=False).failed == 0


def test_registered_tool_exposes_what_the_model_sees(host: Host) -> None:
    tool = host.tools["todo_write"]
    assert tool.name == "todo_write"
    assert tool.description.startswith("Record and update a structured task list")
    assert tool.parameters["type"] == "object"


def test_a_tool_name_is_registered_once(host: Host) -> None:
    with pytest.raises(UsageError, match="a tool named 'todo_write' is already registered"):
        host.tools.register(host.tools["todo_write"])


def test_a_projection_key_is_registered_once(host: Host) -> None:
    registry = host.context.session_projections
    assert registry is not None
    with pytest.raises(UsageError, match="a session projection 'todos' is already registered"):
        registry.register("todos", registry["todos"])


def test_an_unknown_tool_is_a_programmer_error(host: Host, agent: HostAgent) -> None:
    with pytest.raises(UsageError, match=r"no tool named 'todo_read' \(registered: todo_write\)"):
        host.call_tool("todo_read", {}, agent=agent)


class _Echo:
    """A plugin's tool without ``run``: the host calls ``execute``, then ``render``."""

    name = "echo"
    description = "Say it back."
    parameters: ClassVar[dict[str, object]] = {"type": "object"}

    def execute(self, args: str, call: Any) -> dict[str, Any]:
        if not args:
            raise dsh_tool_todo.ToolCallRejected("Error: nothing to echo.")
        return {"said": args, "agent": call.agent}

    def render(self, result: dict[str, Any]) -> str:
        return f"echo {result['said']}"


def test_a_tool_without_run_is_called_through_execute_and_render(host: Host) -> None:
    echo = _Echo()
    host.tools.register(echo)
    agent = host.new_agent()
    for _ in range(2):  # and again, once the host has looked at its class
        assert host.call_tool("echo", "hi", agent=agent) == "echo hi"
        assert host.call_tool("echo", "", agent=agent) == "Error: nothing to echo."
    echo.run = lambda args, call: f"ran {args}"  # type: ignore[attr-defined]
    assert host.call_tool("echo", "hi", agent=agent) == "ran hi"


def test_a_run_set_on_the_tool_itself_is_the_one_called(host: Host, agent: HostAgent) -> None:
    tool = host.tools["todo_write"]
    args = todos(todo("a"))
    assert host.call_tool("todo_write", args, agent=agent).startswith("Updated")
    seen: list[Any] = []
    plain = tool.run

    def traced(args: Any, call: Any) -> str:
        seen.append(args)
        return plain(args, call)

    tool.run = traced  # type: ignore[method-assign]
    try:
        assert host.call_tool("todo_write", args, agent=agent).startswith("Updated")
    finally:
        del tool.run
    assert seen == [args]
    assert len(agent.session.events) == 2


def test_projection_errors_say_what_is_wrong(make_host: HostFactory) -> None:
    host = make_host()
    with pytest.raises(UsageError, match="no session projection 'plans'"):
        host.projection(host.new_agent().session, "plans")
    with pytest.raises(UsageError, match="belongs to no agent of this host"):
        host.projection(MemorySession(), "todos")
    bare = make_host(projections=False)
    with pytest.raises(UsageError, match=r"mounts no session projections \(projections=False\)"):
        bare.projection(bare.new_agent().session, "todos")


def test_two_agents_never_see_each_others_plans(host: Host) -> None:
    first, second = host.new_agent(), host.new_agent()
    host.call_tool("todo_write", todos(todo("mine")), agent=first)
    host.call_tool("todo_write", todos(todo("yours")), agent=second)
    assert host.projection(first.session, "todos") == [todo("mine")]
    assert host.projection(second.session, "todos") == [todo("yours")]
    assert len(first.session.events) == len(second.session.events) == 1


def test_unsubscribe_stops_a_listener() -> None:
    session = MemorySession()
    seen: list[object] = []
    stop = session.subscribe(seen.append)
    session.append("a", {})
    stop()
    session.append("b", {})
    assert [event["type"] for event in seen] == ["a"]  # type: ignore[index]


def test_no_state_is_shared_between_hosts() -> None:
    strict = Host([dsh_tool_todo], {"dsh-tool-todo": {"allowParallelInProgress": False}})
    loose = Host([dsh_tool_todo], {"dsh-tool-todo": {"allowParallelInProgress": True}})
    assert strict.tools["todo_write"].description != loose.tools["todo_write"].description
    assert strict.plugin_manager is not loose.plugin_manager


def test_the_host_does_not_keep_finished_agents_alive(host: Host) -> None:
    import gc
    import weakref

    agent = host.new_agent()
    host.call_tool("todo_write", todos(todo("a")), agent=agent)
    session = weakref.ref(agent.session)
    del agent
    gc.collect()
    assert session() is None
    survivor = host.new_agent()
    assert host.projection(survivor.session, "todos") is None


def test_a_dropped_agent_is_freed_without_waiting_for_the_collector(host: Host) -> None:
    import gc
    import weakref

    gc.collect()
    gc.disable()  # only reference counting frees anything from here
    try:
        agent = host.new_agent()
        host.call_tool("todo_write", todos(todo("a")), agent=agent)
        dropped = weakref.ref(agent)
        session = weakref.ref(agent.session)
        del agent
        assert (dropped(), session()) == (None, None)
    finally:
        gc.enable()


def test_a_session_at_the_address_of_a_dropped_one_gets_its_own_projections(host: Host) -> None:
    import gc

    gc.collect()
    gc.disable()  # freed at once, so the next session often lands at the same address
    try:
        addresses = set()
        for index in range(50):
            agent = host.new_agent()
            addresses.add(id(agent.session))
            host.call_tool("todo_write", todos(todo(f"step {index}")), agent=agent)
            assert host.projection(agent.session, "todos") == [todo(f"step {index}")]
            del agent
    finally:
        gc.enable()
    # The case above really happened: CPython 3.11 and later hand a freed session's memory to
    # the next one here; 3.10 allocates them elsewhere, where each agent is still checked above.
    if sys.version_info >= (3, 11):
        assert len(addresses) < 50


def test_the_host_classifies_its_units_once_not_per_agent(host: Host) -> None:
    from dsh_tool_todo.protocols import ResumableUnit

    checks = 0
    real = type(ResumableUnit).__instancecheck__

    def counted(cls: type, instance: object) -> bool:
        nonlocal checks
        if cls is ResumableUnit:
            checks += 1
        return real(cls, instance)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(type(ResumableUnit), "__instancecheck__", counted)
        agents = [host.new_agent() for _ in range(5)]
    assert checks == 0  # every runtime protocol check costs tens of microseconds
    host.call_tool("todo_write", todos(todo("a")), agent=agents[-1])
    assert host.projection(agents[-1].session, "todos") == [todo("a")]


def test_a_session_that_cannot_be_weakly_referenced_is_refused(host: Host) -> None:
    class SlotSession:
        __slots__ = ()

        def append(self, type: str, data: object, /) -> None: ...

        def subscribe(self, listener: object, /) -> object:
            return lambda: None

    with pytest.raises(UsageError, match="must be weak-referenceable"):
        host.new_agent(SlotSession())  # type: ignore[arg-type]
