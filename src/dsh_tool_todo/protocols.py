"""The host boundary, as structural types: a host or a test fake fits without subclassing."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

if TYPE_CHECKING:  # the boundary imports nothing of the package when it runs
    from .core.links import End

__all__ = [
    "Agent",
    "Event",
    "LogReader",
    "PluginContext",
    "Progress",
    "ProjectionRegistry",
    "ProjectionUnit",
    "ResumableUnit",
    "Session",
    "SessionSummary",
    "Snapshot",
    "State",
    "StoreSession",
    "TailPage",
    "Tool",
    "ToolExec",
    "ToolRegistry",
    "View",
]

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


# --- reading stored logs: the seam between a store and its viewers ---------------------


@dataclass(frozen=True)
class Progress:
    """The current plan in figures: what a session list shows per session."""

    completed: int
    total: int
    in_progress: int
    cleared: bool  # the latest deciding event was a turn/start (or nothing was ever written)

    def as_json(self) -> dict[str, Any]:
        """The figures as the web view and ``dsh-todo sessions --json`` give them.

        >>> Progress(1, 3, 1, False).as_json()
        {'completed': 1, 'total': 3, 'inProgress': 1, 'cleared': False}
        """
        return {
            "completed": self.completed,
            "total": self.total,
            "inProgress": self.in_progress,
            "cleared": self.cleared,
        }


@dataclass(frozen=True)
class SessionSummary:
    """One row of a session list."""

    name: str
    last_activity: float  # seconds since the epoch
    progress: Progress | None  # None when the log could not be read
    # The parent session's key from the log's first ``session/link`` event (None: no link,
    # or the log could not be read); a key the viewer cannot see is still given as is.
    parent: str | None = None
    last_seq: int | None = None  # the newest event's seq; None when the log could not be read
    working_on: str | None = None  # the content of the first in_progress item, if any
    # The seq of the newest todo/write or turn/start (-1: the log has neither); None when the
    # log could not be read or the reader does not say. Only such an event changes the plan
    # and its health, so a viewer keeps what it derived from them while this stays the same.
    plan_seq: int | None = None
    # How a delegated run's session ended, when the newest of its plan events and
    # ``session/end`` events is an end (``links.end_of``); None while it runs, when it never
    # ended, or when the log could not be read.
    end: End | None = None


@dataclass(frozen=True)
class Snapshot:
    """What a stream starts from: the newest seq and the event that fixes the plan."""

    last_seq: int  # -1 for an empty log
    deciding: Event | None  # the latest todo/write or turn/start, None if neither
    # Where the read ended, for a store whose log can change under it: (inode, offset of
    # the end of its whole lines) for a JSONL file; (xmin, seq) of the newest row for
    # PostgreSQL; None where there is no such place.
    position: tuple[int, int] | None = None


@dataclass(frozen=True)
class TailPage:
    """Events before a seq, oldest first, and whether older ones exist.

    A page filtered by type reads a bounded stretch of the log per request, so
    it may hold fewer than ``limit`` events (none, even) while ``more`` is true:
    the next page starts before ``cursor``, the lowest seq the page looked at
    (``None`` when the page has no older part to continue from).
    """

    events: list[Event]
    more: bool
    cursor: int | None = None


class LogReader(Protocol):
    """Read-only access to a store's session logs: what every viewer (web, CLI) reads through.

    A store's reader answers four questions: which sessions exist (with their
    last activity and progress), what the last events before a given seq are
    (the history tail page), what the newest event and the event deciding the
    plan are (the snapshot a stream starts from), and which events follow a
    given seq (the live follow). Every read goes from the end of a log: its
    cost depends on how far back it reaches, never on the log's length.

    Unknown sessions raise :class:`~dsh_tool_todo.errors.SessionNotFound`, a
    store that cannot be reached :class:`~dsh_tool_todo.errors.StoreUnavailable`,
    a log that breaks its invariant :class:`~dsh_tool_todo.errors.InvalidLog`.

    A viewer also asks a reader what only the store knows, so that it never
    tells stores apart itself: how to name the store (:attr:`where`), which
    owner a session stands for (:meth:`owner_of`), and whether to keep a list's
    index while it serves (:meth:`hold_list`).
    """

    @property
    def where(self) -> str:
        """The store as messages name it (a directory; ``PostgreSQL at host:port/db``), never
        with a password: what ``dsh-todo serve`` says it serves."""
        ...

    def owner_of(self, name: str) -> str | None:
        """The owner key session ``name`` stands for, when the store names each owner's log
        after its key (an :class:`~dsh_tool_todo.stores.owners.OwnerRegistry` directory) and
        ``name`` decodes to one exactly; ``None`` otherwise. Reads nothing."""
        ...

    def hold_list(self) -> None:
        """Keep what a list reads between lists, until :meth:`aclose`: a viewer that serves
        for long says so at its start. A reader with nothing to keep does nothing."""
        ...

    async def sessions(self, query: str, limit: int) -> tuple[list[SessionSummary], int]:
        """Sessions whose name contains ``query``, newest activity first, at most ``limit``;
        and how many matched in all."""
        ...

    async def tail(
        self, name: str, *, before: int | None, limit: int, types: Collection[str] | None = None
    ) -> TailPage: ...

    async def snapshot(self, name: str) -> Snapshot: ...

    def changes(self) -> AsyncIterator[frozenset[str]]:
        """The names of sessions whose row in :meth:`sessions` may have changed, a set at a
        time, as they change, forever: what a live list waits on instead of asking again.

        One running iterator serves every open list of a viewer; while it runs,
        :meth:`sessions` may answer from what it keeps. A reader that cannot
        tell which sessions changed may yield every name it knows.
        """
        ...

    def follow(
        self, name: str, *, after: int, since: Snapshot | None = None
    ) -> AsyncIterator[Event]:
        """Every event with a seq above ``after``, in order, then each new one, forever.

        ``since`` is the snapshot the stream just sent, when ``after`` is its seq: a
        store whose log can be rewritten under it goes on from exactly where that
        snapshot was read. Raises :class:`~dsh_tool_todo.errors.LogReplaced` when
        the log no longer continues the one read so far.
        """
        ...

    async def aclose(self) -> None: ...
