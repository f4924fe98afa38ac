"""A small, complete reference host: load plugins, own agent sessions, call tools.

Host authors use it to test their own integration; this project's tests, example
and CLI run on it. It is deliberately plain: in-memory sessions, one thread-safe
lock per session, projections driven as events are appended.

>>> import dsh_tool_todo
>>> host = Host([dsh_tool_todo], {"dsh-tool-todo": {"allowParallelInProgress": False}})
>>> agent = host.new_agent()
>>> host.call_tool("todo_write", {"todos": [{"content": "Plan", "status": "in_progress"}]},
...                agent=agent)
'Updated todo list: 0 pending, 1 in progress, 0 completed.'
>>> host.projection(agent.session, "todos")
[{'content': 'Plan', 'status': 'in_progress'}]
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Protocol

import pluggy

from .errors import ToolCallRejected, UsageError
from .listeners import Event, Listener
from .loader import load_plugins, new_plugin_manager
from .protocols import ProjectionUnit
from .stores.memory import AsyncMemorySession as AsyncMemorySession
from .stores.memory import MemorySession as MemorySession


class ObservableSession(Protocol):
    """A session the host can drive projections from."""

    def append(self, type: str, data: Mapping[str, Any], /) -> object: ...

    def subscribe(self, listener: Listener, /) -> Callable[[], None]: ...


@dataclass(frozen=True)
class ToolCall:
    """What a tool learns about its caller."""

    agent: HostAgent | None


@dataclass(frozen=True, eq=False)
class HostAgent:
    """An agent of the host, owning one session."""

    session: Any

    @cached_property
    def call(self) -> ToolCall:
        """The exec context of this agent's tool calls, made once rather than per call."""
        return ToolCall(self)


_NO_AGENT = ToolCall(None)


class ToolTable(dict[str, Any]):
    """``ctx.tools``: tools by name; a name is registered once."""

    def register(self, tool: Any, /) -> None:
        if tool.name in self:
            raise UsageError(f"a tool named {tool.name!r} is already registered")
        self[tool.name] = tool


class ProjectionTable(dict[str, ProjectionUnit[Any, Any]]):
    """``ctx.session_projections``: projection units by key; a key is registered once."""

    def register(self, key: str, unit: ProjectionUnit[Any, Any], /) -> None:
        if key in self:
            raise UsageError(f"a session projection {key!r} is already registered")
        self[key] = unit


@dataclass(frozen=True)
class HostContext:
    tools: ToolTable
    options: Mapping[str, Mapping[str, Any]]
    session_projections: ProjectionTable | None


@dataclass
class _ProjectionStates:
    units: ProjectionTable
    states: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.states = {key: unit.init for key, unit in self.units.items()}

    def feed(self, event: Event) -> None:
        states = self.states
        for key, unit in self.units.items():
            states[key] = unit.apply(states[key], event)


class Host:
    """Load plugins through pluggy, then run their tools for agents it creates."""

    def __init__(
        self,
        plugins: Iterable[object],
        options: Mapping[str, Mapping[str, Any]] | None = None,
        *,
        projections: bool = True,
        plugin_manager: pluggy.PluginManager | None = None,
    ) -> None:
        self.plugin_manager = plugin_manager or new_plugin_manager()
        self.context = HostContext(
            tools=ToolTable(),
            options=dict(options or {}),
            session_projections=ProjectionTable() if projections else None,
        )
        self.plugins = load_plugins(self.plugin_manager, plugins, self.context)
        # By id, and dropped when the session is collected: the host never pins an agent.
        self._projections: dict[int, _ProjectionStates] = {}

    @property
    def tools(self) -> ToolTable:
        return self.context.tools

    def new_agent(self, session: ObservableSession | None = None) -> HostAgent:
        """An agent owning ``session`` (a fresh :class:`MemorySession` by default)."""
        owned = MemorySession() if session is None else session
        units = self.context.session_projections
        if units is not None:
            states = _ProjectionStates(units)
            try:
                weakref.finalize(owned, self._projections.pop, id(owned), None)
            except TypeError:
                raise UsageError(
                    "a session must be weak-referenceable (a __slots__ class needs __weakref__)"
                ) from None
            owned.subscribe(states.feed)
            self._projections[id(owned)] = states
        return HostAgent(session=owned)

    def call_tool(self, name: str, args: Any, *, agent: HostAgent | None = None) -> str:
        """Run a tool as the model asked; return exactly the text the model reads."""
        try:
            tool = self.tools[name]
        except KeyError:
            raise self._unknown_tool(name) from None
        try:
            result = tool.execute(args, _NO_AGENT if agent is None else agent.call)
        except ToolCallRejected as rejected:
            return rejected.model_text
        text: str = tool.render(result)
        return text

    async def acall_tool(self, name: str, args: Any, *, agent: HostAgent | None = None) -> str:
        """:meth:`call_tool` for asyncio hosts and sessions with a coroutine ``append``."""
        try:
            tool = self.tools[name]
        except KeyError:
            raise self._unknown_tool(name) from None
        try:
            result = await tool.aexecute(args, _NO_AGENT if agent is None else agent.call)
        except ToolCallRejected as rejected:
            return rejected.model_text
        text: str = tool.render(result)
        return text

    def projection(self, session: object, key: str) -> Any:
        """The current view of projection ``key`` over the events appended to ``session``."""
        units = self.context.session_projections
        if units is None:
            raise UsageError("this host mounts no session projections (projections=False)")
        if key not in units:
            raise UsageError(f"no session projection {key!r} is registered")
        states = self._projections.get(id(session))
        if states is None:
            raise UsageError("that session belongs to no agent of this host")
        return units[key].view(states.states[key])

    def _unknown_tool(self, name: str) -> UsageError:
        known = ", ".join(sorted(self.tools)) or "none"
        return UsageError(f"no tool named {name!r} (registered: {known})")
