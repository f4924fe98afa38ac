"""The host boundary, as structural types: a host or a test fake fits without subclassing."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Mapping
from typing import Any, Protocol, TypeVar, runtime_checkable

State = TypeVar("State")
View = TypeVar("View", covariant=True)


@runtime_checkable
class Session(Protocol):
    """An agent's append-only session log.

    ``append`` may be a coroutine function; such a session is called through the
    tool's async path.
    """

    def append(self, type: str, data: Mapping[str, Any], /) -> object | Awaitable[object]: ...


Event = dict[str, Any]
"""A recorded event: ``{"seq": int, "type": str, "data": {...}}`` (``seq`` from 0, gapless)."""


@runtime_checkable
class StoreSession(Protocol):
    """The session protocol every store of this library speaks (memory, JSONL, PostgreSQL).

    - ``append`` records one event and returns it with its ``seq``; once it
      returns, the event is acknowledged and is never lost or rewritten.
    - ``subscribe`` registers a listener, called with each appended event in
      log order, in the appending thread; it returns the function that
      unsubscribes it. A listener that raises is logged (logger
      ``dsh_tool_todo``), never turned into a failed append.
    - ``latest(types)`` is the newest recorded event whose type is in
      ``types``, or ``None``; stores answer it cheaply (from the end of a file,
      by an index), which is how a host resumes a projection (see
      :class:`ResumableUnit`).
    - ``close`` releases the session's writer claim (one writer per log: a
      second writer is refused while the first is open). Sessions are context
      managers.
    """

    def append(self, type: str, data: Mapping[str, Any], /) -> Event: ...

    def subscribe(self, listener: Callable[[Event], None], /) -> Callable[[], None]: ...

    def latest(self, types: Collection[str], /) -> Event | None: ...

    def close(self) -> None: ...


class Agent(Protocol):
    """The agent that owns a session."""

    @property
    def session(self) -> Session: ...


class ToolExec(Protocol):
    """What the host knows about one tool call: the calling agent, if any."""

    @property
    def agent(self) -> Agent | None: ...


class Tool(Protocol):
    """A model-facing tool as a tool registry holds it."""

    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...

    @property
    def parameters(self) -> Mapping[str, Any]: ...


class ToolRegistry(Protocol):
    """Where plugins register their tools (``ctx.tools``)."""

    def register(self, tool: Any, /) -> None: ...


class ProjectionUnit(Protocol[State, View]):
    """A fold of session events into one value that hosts can show."""

    @property
    def state_version(self) -> int: ...

    @property
    def init(self) -> State: ...

    def apply(self, state: State, event: Mapping[str, Any], /) -> State: ...

    def view(self, state: State, /) -> View: ...


@runtime_checkable
class ResumableUnit(ProjectionUnit[State, View], Protocol):
    """A projection unit whose state a host can rebuild from one recorded event.

    ``resume_from`` names the event types that each fix the whole state (for
    ``todos``: ``todo/write`` and ``turn/start``); ``resume(event)`` returns the
    state after that event (``init`` for ``None``) and raises
    :class:`~dsh_tool_todo.errors.InvalidLog` if the event breaks the unit's
    invariant. A host opening an agent on an existing session calls
    ``unit.resume(session.latest(unit.resume_from))``.
    """

    @property
    def resume_from(self) -> tuple[str, ...]: ...

    def resume(self, event: Mapping[str, Any] | None, /) -> State: ...


class ProjectionRegistry(Protocol):
    """Where plugins register session projections (``ctx.session_projections``).

    Units are registered while the host applies its plugins; a host may refuse
    later registrations (the reference host does: a late unit would have no
    state for the agents that already exist).
    """

    def register(self, key: str, unit: ProjectionUnit[Any, Any], /) -> None: ...


class PluginContext(Protocol):
    """What a host hands to ``inject`` and ``apply``.

    ``session_projections`` is ``None`` when the host mounts no projection registry.
    """

    @property
    def tools(self) -> ToolRegistry: ...

    @property
    def options(self) -> Mapping[str, Mapping[str, Any]]: ...

    @property
    def session_projections(self) -> ProjectionRegistry | None: ...
