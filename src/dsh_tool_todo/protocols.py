"""The host boundary, as structural types: a host or a test fake fits without subclassing."""

from __future__ import annotations

from collections.abc import Awaitable, Mapping
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


class ProjectionRegistry(Protocol):
    """Where plugins register session projections (``ctx.session_projections``)."""

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
