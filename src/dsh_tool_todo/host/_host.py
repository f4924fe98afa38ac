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

import copy
import inspect
import threading
import weakref
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol

import pluggy

from ..core.listeners import Listener
from ..core.tool import OwnedCall
from ..errors import ToolCallRejected, UsageError
from ..stores.memory import AsyncMemorySession as AsyncMemorySession
from ..stores.memory import MemorySession as MemorySession
from ._states import ProjectionStates, Units
from ._tables import HostContext as HostContext
from ._tables import ProjectionTable as ProjectionTable
from ._tables import ToolTable as ToolTable
from .loader import load_plugins, new_plugin_manager

__all__: list[str] = []


class ObservableSession(Protocol):
    """A session the host can drive projections from."""

    def append(self, type: str, data: Mapping[str, Any], /) -> object: ...

    def subscribe(self, listener: Listener, /) -> Callable[[], None]: ...


@dataclass(frozen=True)
class ToolCall:
    """What a tool learns about its caller."""

    agent: HostAgent | None


class HostAgent(OwnedCall):
    """An agent of the host, owning one session.

    It is the exec context of its own tool calls (its ``agent`` is itself):
    an exec context holding the agent would make a reference cycle, and an
    agent in a cycle, with its session and events, lives until the collector
    runs rather than until it is dropped.
    """

    __slots__ = ("__weakref__",)

    session: Any

    def __init__(self, session: Any) -> None:
        self.session = session
        self.call_id = None  # the host's calls carry no tool-call id

    def __repr__(self) -> str:
        return f"HostAgent(session={self.session!r})"

    @property
    def agent(self) -> HostAgent:
        return self

    @property
    def call(self) -> HostAgent:
        """The exec context of this agent's tool calls (``tool.execute(args, agent.call)``)."""
        return self


_NO_AGENT = ToolCall(None)


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
        self.tools: ToolTable = self.context.tools  # an attribute: read on every call
        self.plugins = load_plugins(self.plugin_manager, plugins, self.context)
        if self.context.session_projections is not None:
            self.context.session_projections.seal()
        # By id, and dropped when the session is freed: the host never pins an agent.
        self._projections: dict[int, ProjectionStates] = {}
        # Marks the states of a session this host made, which that session keeps itself.
        self._mark = object()
        self._runners: set[type] = set()  # tool classes that offer run
        self._agents_lock = threading.Lock()
        units = self.context.session_projections
        self._units = Units(units if units is not None else {})

    def new_agent(
        self,
        session: ObservableSession | None = None,
        *,
        parent: str | HostAgent | None = None,
        parent_call_id: str | None = None,
    ) -> HostAgent:
        """An agent owning ``session`` (a fresh :class:`MemorySession` by default).

        ``parent`` names the agent this one works for, a sub-agent's link
        (:mod:`dsh_tool_todo.core.links`): the parent's session key, or its
        :class:`HostAgent` (whose session has a ``key``), with
        ``parent_call_id`` the parent's tool call that started this agent. The
        link is recorded at the head of a new log, or checked against the one a
        reopened log holds (:class:`~dsh_tool_todo.errors.LinkConflict`), before
        the host subscribes.

        The host subscribes its projections to the session once: a second agent
        on the same session shares them. A session the host makes is not
        subscribed to: it keeps every event in its list, and the host folds what
        is new when :meth:`projection` reads it. A session with ``latest`` (every store
        of this library) resumes each :class:`~dsh_tool_todo.protocols.ResumableUnit`
        from its log, so an agent opened on an existing log starts with its plan;
        a last ``todo/write`` that breaks the invariant raises
        :class:`~dsh_tool_todo.errors.InvalidLog` and leaves no subscription.
        """
        made = session is None
        if parent is not None or parent_call_id is not None:
            session = _linked(session, _parent_key(parent, parent_call_id), parent_call_id)
        owned = MemorySession() if session is None else session
        units = self.context.session_projections
        if units is None:
            return HostAgent(owned)
        table = self._units
        if units.changes != table.changes:  # set past the registry's own method
            self._units = table = Units(units)
        if made:  # no one else has it yet, and its own list of events is all the host needs
            # The session keeps its states, marked as this host's: they go with it, and the
            # host keeps no entry to drop when it is freed.
            states = ProjectionStates(table, len(owned.events))  # type: ignore[attr-defined]
            owned._host_states = (self._mark, states)  # type: ignore[attr-defined]
            return HostAgent(owned)
        with self._agents_lock:
            key = id(owned)
            if key in self._projections or self._made_here(owned) is not None:
                return HostAgent(owned)  # one subscription per session per host
            states = ProjectionStates(table, None)
            try:
                # Freed, the session's entry goes at once: a later session may get its id.
                # The callback is pop(key, ref): the dead ref lands as pop's default.
                states.session_ref = weakref.ref(owned, partial(self._projections.pop, key))
            except TypeError:
                raise UsageError(
                    "a session must be weak-referenceable (a __slots__ class needs __weakref__)"
                ) from None
            unsubscribe = owned.subscribe(states.feed)  # first: no event can slip past
            try:
                states.resume(owned)
            except BaseException:
                unsubscribe()
                raise
            self._projections[key] = states
        return HostAgent(owned)

    def call_tool(self, name: str, args: Any, *, agent: HostAgent | None = None) -> str:
        """Run a tool as the model asked; return exactly the text the model reads."""
        try:
            tool = self.tools[name]
        except KeyError:
            raise self._unknown_tool(name) from None
        call = _NO_AGENT if agent is None else agent
        # A tool that renders itself (no result to copy), asked of its class once: run is
        # called through the tool, so a run set on the tool itself is still the one called.
        if type(tool) in self._runners or self._runs(tool):
            text: str = tool.run(args, call)
            return text
        try:
            result = tool.execute(args, call)
        except ToolCallRejected as rejected:
            return rejected.model_text
        rendered: str = tool.render(result)
        return rendered

    async def acall_tool(self, name: str, args: Any, *, agent: HostAgent | None = None) -> str:
        """:meth:`call_tool` for asyncio hosts and sessions with a coroutine ``append``."""
        try:
            tool = self.tools[name]
        except KeyError:
            raise self._unknown_tool(name) from None
        call = _NO_AGENT if agent is None else agent
        arun = getattr(tool, "arun", None)
        if arun is not None:
            text: str = await arun(args, call)
            return text
        try:
            result = await tool.aexecute(args, call)
        except ToolCallRejected as rejected:
            return rejected.model_text
        rendered: str = tool.render(result)
        return rendered

    def projection(self, session: object, key: str) -> Any:
        """A copy of the current view of projection ``key`` over ``session``'s events.

        A copy, so that a reader can never change what was recorded (reads are
        rare; the write path pays nothing). Raises
        :class:`~dsh_tool_todo.errors.InvalidLog` naming the event while the
        unit is broken: a host appended an event the unit could not fold.
        """
        units = self.context.session_projections
        if units is None:
            raise UsageError("this host mounts no session projections (projections=False)")
        if key not in units:
            raise UsageError(f"no session projection {key!r} is registered")
        states = self._projections.get(id(session)) or self._made_here(session)
        if states is None:
            raise UsageError("that session belongs to no agent of this host")
        if key not in states.units:
            raise UsageError(f"session projection {key!r} was added after this agent was made")
        return _copy_view(states.view(key, session))

    def _made_here(self, session: object) -> ProjectionStates | None:
        """The states a session this host made keeps, or ``None``."""
        made = getattr(session, "_host_states", None)
        return made[1] if made is not None and made[0] is self._mark else None

    def _runs(self, tool: Any) -> bool:
        if getattr(tool, "run", None) is None:
            return False
        if getattr(type(tool), "run", None) is not None:
            self._runners.add(type(tool))
        return True

    def _unknown_tool(self, name: str) -> UsageError:
        known = ", ".join(sorted(self.tools)) or "none"
        return UsageError(f"no tool named {name!r} (registered: {known})")


def _linked(
    session: ObservableSession | None, parent: str, parent_call_id: str | None
) -> ObservableSession:
    """``session`` with its parent link recorded (a new :class:`MemorySession` for ``None``)."""
    if session is None:
        return MemorySession(parent=parent, parent_call_id=parent_call_id)
    link = getattr(session, "link", None)
    if link is None:
        raise UsageError(
            f"a {type(session).__name__} cannot record a parent (it has no link "
            "method): use a store session of this library, or link it yourself"
        )
    linked = link(parent, parent_call_id=parent_call_id)
    if inspect.isawaitable(linked):  # an asyncio session: its link is I/O to await
        getattr(linked, "close", lambda: None)()
        raise UsageError(
            f"a {type(session).__name__} links asynchronously: "
            "`await session.link(parent, parent_call_id=...)` (or open it with "
            "parent=), then call new_agent(session) without parent="
        )
    return session


def _parent_key(parent: str | HostAgent | None, parent_call_id: str | None) -> str:
    if parent is None:
        raise UsageError("parent_call_id names a call of the parent: pass parent= too")
    if isinstance(parent, HostAgent):
        key = getattr(parent.session, "key", None)
        if not isinstance(key, str) or not key:
            raise UsageError(
                "the parent agent's session has no key to name it by: give its sessions "
                "keys (MemorySession(key=...), a JSONL or PostgreSQL session), or pass "
                "parent= the key as a string"
            )
        return key
    return parent


def _copy_view(view: Any) -> Any:
    """A copy deep enough that editing it cannot reach the recorded event.

    A plan (a list of flat dicts of strings) is copied item by item, several
    times faster than ``copy.deepcopy``; any other view is deep-copied.
    """
    if view is None:
        return None
    if type(view) is list and all(
        type(item) is dict and all(type(value) is str for value in item.values()) for item in view
    ):
        return [item.copy() for item in view]
    return copy.deepcopy(view)
