"""One agent's projection states: folded from its session's events, broken and resumed.

A unit that cannot fold an event reads as broken (:class:`~dsh_tool_todo.errors.InvalidLog`
naming the event) until an event it resumes from fixes it, and the failure is logged once.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Mapping
from typing import Any

from ..core.listeners import LOGGER_NAME, Event
from ..errors import InvalidLog
from ..protocols import ProjectionUnit, ResumableUnit


class Broken:
    """The state of a unit that could not fold an event: reading it raises ``InvalidLog``."""

    __slots__ = ("message",)

    def __init__(self, message: str) -> None:
        self.message = message


class Units:
    """A host's projection units, each classified and its fold looked up once.

    Every agent's states are made from it: a runtime check against the
    ``ResumableUnit`` protocol costs several calls' worth of time, so it is
    not made per agent.
    """

    __slots__ = ("by_key", "changes", "folds", "resumable", "starts")

    def __init__(self, units: Mapping[str, ProjectionUnit[Any, Any]]) -> None:
        self.by_key = dict(units)  # a snapshot: what the agents' states are made for
        self.changes = getattr(units, "changes", 0)  # the table's count when snapshot
        self.folds = tuple((key, unit.apply) for key, unit in self.by_key.items())
        self.resumable: dict[str, ResumableUnit[Any, Any]] = {
            key: unit for key, unit in self.by_key.items() if isinstance(unit, ResumableUnit)
        }
        # Each unit's start on a log with nothing to resume: its init, or resume(None).
        self.starts = tuple(
            (key, unit, None if key not in self.resumable else self.resumable[key].resume)
            for key, unit in self.by_key.items()
        )


class ProjectionStates:
    """One agent's projection states: fed by a single subscription to its session, or, for a
    session the host made, folded from its list of events when read."""

    __slots__ = (
        "_folds",
        "_lock",
        "_next_seq",
        "_pending",
        "_plain",
        "_table",
        "broken",
        "session_ref",
        "states",
        "units",
    )

    def __init__(self, table: Units, follow_from: int | None) -> None:
        self._table = table
        self._folds = table.folds
        self.units = table.by_key
        self.broken = False
        self._lock = threading.Lock()
        self.session_ref: weakref.ref[Any] | None = None  # its callback drops these states
        # Following a log only this host appends to (a MemorySession it made), folded when
        # read: the seq of the first event not folded yet. None: fed by a subscription.
        self._next_seq = follow_from
        states: dict[str, Any] = {}
        self.states = states
        if follow_from is None:  # subscribed, then resumed: events heard meanwhile are kept
            for key, unit in table.by_key.items():
                states[key] = unit.init
            self._pending: list[Event] | None = []
            self._plain = False  # resumed and not broken: feed folds straight away
        else:  # nothing to resume: a log with no event, or its link alone, which no unit folds
            for key, unit, resume in table.starts:
                states[key] = unit.init if resume is None else resume(None)
            self._pending = None
            self._plain = True

    def feed(self, event: Event) -> None:
        if not self._plain:
            self._feed_unresumed_or_broken(event)
            return
        states = self.states
        for key, apply in self._folds:
            try:
                states[key] = apply(states[key], event)
            except Exception as error:
                self._break(key, event, error)

    def _feed_unresumed_or_broken(self, event: Event) -> None:
        if self._pending is not None and self._buffer(event):
            return
        self._fold_around_broken(event)

    def resume(self, session: object) -> None:
        """Seed each resumable unit from ``session.latest``, then fold what arrived meanwhile.

        Called after subscribing, so no event is missed; ``latest`` is read
        outside this object's lock, because the session calls :meth:`feed` under
        its own lock.
        """
        latest = getattr(session, "latest", None)
        resumed: dict[str, tuple[Any, Any]] = {}
        if latest is not None:
            for key, resumable in self._table.resumable.items():
                event = latest(resumable.resume_from)
                after = None if event is None else event.get("seq")
                resumed[key] = (resumable.resume(event), after)
        with self._lock:
            pending, self._pending = self._pending or [], None
            for key, (state, _after) in resumed.items():
                self.states[key] = state
            for event in pending:
                seq = event.get("seq")
                for key, unit in self.units.items():
                    after = resumed.get(key, (None, None))[1]
                    if after is not None and seq is not None and seq <= after:
                        continue  # already in the resumed state
                    self._fold_one(key, unit, event)
            self._plain = not self.broken

    def view(self, key: str, session: Any) -> Any:
        if self._next_seq is not None:
            self._catch_up(session)
        state = self.states[key]
        if isinstance(state, Broken):
            raise InvalidLog(state.message)
        return self.units[key].view(state)

    def _catch_up(self, session: Any) -> None:
        with self._lock:
            log: list[Event] = session.events
            if not log or self._next_seq is None:
                return
            # By seq, not position: a list emptied by its owner still folds what came after.
            new = log[max(self._next_seq - log[0]["seq"], 0) :]
            for event in new:
                self.feed(event)
            if new:
                self._next_seq = new[-1]["seq"] + 1

    def _buffer(self, event: Event) -> bool:
        with self._lock:
            if self._pending is None:
                return False
            self._pending.append(event)
            return True

    def _fold_around_broken(self, event: Event) -> None:
        for key, unit in self.units.items():
            self._fold_one(key, unit, event)
        self.broken = any(isinstance(state, Broken) for state in self.states.values())
        self._plain = not self.broken

    def _fold_one(self, key: str, unit: ProjectionUnit[Any, Any], event: Event) -> None:
        state = self.states[key]
        try:
            if not isinstance(state, Broken):
                self.states[key] = unit.apply(state, event)
            elif (resumable := self._table.resumable.get(key)) is not None and event.get(
                "type"
            ) in resumable.resume_from:
                self.states[key] = resumable.resume(event)  # this event alone fixes the state
        except Exception as error:
            self._break(key, event, error)

    def _break(self, key: str, event: Event, error: Exception) -> None:
        resumable = self._table.resumable.get(key)
        until = (
            f"until a later {' or '.join(resumable.resume_from)} event"
            if resumable is not None
            else "from now on (the unit cannot resume)"
        )
        message = (
            f"session projection {key!r} could not fold event seq={event.get('seq')} "
            f"type={event.get('type')!r} ({type(error).__name__}: {error}); "
            f"it reads as broken {until}"
        )
        self.states[key] = Broken(message)
        self.broken = True
        self._plain = False
        import logging

        logging.getLogger(LOGGER_NAME).error(message, exc_info=error)
