"""Plan-health signals: how a session's plan moved, read from its log (the model sees nothing).

Each signal is computed from two consecutive ``todo/write`` snapshots of one
session within one turn (a ``turn/start`` begins a new turn, with no previous
snapshot), and items are matched by their ``content``, exactly: a list is
replaced whole on every write, so there are no ids to follow, and an id that
rebinds to another item would make the signal lie. Definitions (also in
``docs/fleet.md``), for a write ``cur`` after the turn's previous write ``prev``:

``dropped``
    an item of ``prev`` whose status was ``pending`` or ``in_progress`` has no
    item of the same content in ``cur``.
``bulk_completed``
    at least :attr:`HealthOptions.bulk_completed` (default 3) contents were
    ``pending`` in ``prev`` and are ``completed`` in ``cur``.
``all_done_at_once``
    ``cur`` is not empty, every item of it is ``completed``, and at least
    :attr:`HealthOptions.all_done_at_once` (default 2) of them were not
    ``completed`` in ``prev`` (absent from it, ``pending`` or ``in_progress``).
``stuck``
    the same content has been ``in_progress`` in
    :attr:`HealthOptions.stuck_writes` (default 5) consecutive writes of the turn;
    raised once per run, at the write that reaches the threshold. Folded from
    the middle of a turn (``turn_health(..., partial=True)``: a viewer reads
    only a long turn's latest writes), a run already under way at the first
    write read may have begun earlier: its signal is marked ``at_least``, and
    says "at least" that many writes, by its seq.
``unchanged``
    ``cur`` equals ``prev``: the same items, in the same order, with the same
    statuses.
``not_honoured``
    a person's requests (:mod:`dsh_tool_todo.core.requests`) the model was told of and
    its turn ended without honouring, at the ``turn/end`` or ``turn/start`` that ended it
    (items: the contents asked about). Unlike the others, it is raised by that event,
    not by a write.

The first write of a turn has no ``prev`` and raises none of them.

>>> def write(seq, *items):
...     todos = [{"content": c, "status": s} for c, s in items]
...     return {"seq": seq, "type": "todo/write", "data": {"todos": todos}}
>>> log = [write(0, ("A", "in_progress"), ("B", "pending")), write(1, ("A", "completed"))]
>>> [(s.kind, s.seq, s.items) for s in plan_health(log)]
[('dropped', 1, ('B',))]
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any, Literal

from ..errors import UsageError
from .contract import EVENT_TYPE, REQUEST_EVENT_TYPES, TURN_START
from .requests import TURN_END, _Fold, _match_key

__all__ = [
    "HealthOptions",
    "HealthProjection",
    "Signal",
    "describe",
    "plan_health",
    "turn_health",
]

SignalKind = Literal[
    "dropped", "bulk_completed", "all_done_at_once", "stuck", "unchanged", "not_honoured"
]
KINDS: tuple[SignalKind, ...] = (
    "dropped",
    "bulk_completed",
    "all_done_at_once",
    "stuck",
    "unchanged",
    "not_honoured",
)
_ASKING = frozenset({*REQUEST_EVENT_TYPES, TURN_END})


@dataclass(frozen=True)
class HealthOptions:
    """The thresholds of the signals that have one (see the module's definitions)."""

    bulk_completed: int = 3
    all_done_at_once: int = 2
    stuck_writes: int = 5

    def __post_init__(self) -> None:
        for name in ("bulk_completed", "all_done_at_once", "stuck_writes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise UsageError(
                    f"HealthOptions.{name} must be an int of at least 1, not {value!r}"
                )
        if self.stuck_writes < 2:
            raise UsageError(
                "HealthOptions.stuck_writes must be at least 2: one write in progress is no run"
            )


@dataclass(frozen=True)
class Signal:
    """One signal: its kind, the seq of the write that raised it, and the contents concerned
    (for ``stuck``, the one item; for ``unchanged``, none); ``count`` is how many items, or,
    for ``stuck``, how many writes in a row. ``at_least`` (``stuck`` only): the run was
    already under way at the first write a partial fold read, so by ``seq`` the item had
    been in progress for ``count`` writes or more, and the run reached the threshold at
    ``seq`` or before it."""

    kind: SignalKind
    seq: int
    items: tuple[str, ...] = ()
    count: int = 0
    at_least: bool = False

    def as_json(self) -> dict[str, Any]:
        """The signal as JSON: ``kind``, ``seq``, ``items``, ``count``, and ``atLeast: true``
        only on a ``stuck`` signal whose run began before the writes read."""
        found = {"kind": self.kind, "seq": self.seq, "items": list(self.items), "count": self.count}
        if self.at_least:
            found["atLeast"] = True
        return found


Snapshot = Sequence[Mapping[str, Any]]
Pairs = tuple[tuple[str, Any], ...]


# The turn's signals, newest first, each cell sharing the ones before it: a step adds its
# signals without copying the turn's earlier ones, so a long turn folds in linear time.
_Found = tuple[Signal, "_Found"] | None


@dataclass(frozen=True)
class HealthState:
    """Where the fold is: the turn's previous snapshot, the current in-progress run, and the
    signals of the turn so far."""

    previous: Pairs | None = None  # the previous write's items as (content, status)
    run: tuple[str, int] | None = None  # (content in progress, consecutive writes)
    found: _Found = field(default=None, repr=False, compare=False)
    # The fold began inside a turn and has read none of its writes yet: a run in progress at
    # the first one may have begun before it.
    mid_turn: bool = False
    run_open: bool = False  # the current run was under way at the first write of such a fold
    # A person's requests still pending (core.requests), when any was taken: copied on each
    # step that changes them, so a state never changes once made.
    asked: _Fold | None = field(default=None, repr=False, compare=False)

    @cached_property
    def signals(self) -> tuple[Signal, ...]:
        """The turn's signals so far, oldest first (built once per state, when asked)."""
        newest_first = []
        cell = self.found
        while cell is not None:
            newest_first.append(cell[0])
            cell = cell[1]
        return tuple(reversed(newest_first))


def step(state: HealthState, event: Mapping[str, Any], options: HealthOptions) -> HealthState:
    """The state after ``event``; other events than ``todo/write`` and ``turn/start`` keep it,
    and so does what is no event at all (not a mapping: a reader refuses it)."""
    kind = _kind(event)
    if type(kind) is str and (kind in _ASKING or (kind == TURN_START and state.asked)):
        if kind == TURN_END and state.asked is None:
            return state
        ended = _asked(state, event, kind)
        # a turn/start ends the turn its signal belongs to: the new turn starts without it
        return HealthState(asked=ended.asked) if kind == TURN_START else ended
    if kind == TURN_START:
        return HealthState()
    if kind != EVENT_TYPE:
        return state
    data = event.get("data")
    todos = data.get("todos") if isinstance(data, Mapping) else None
    if not isinstance(todos, list):
        return state  # a broken write: a reader refuses the log; here it raises no signal
    seq = event.get("seq", -1)
    seq = seq if type(seq) is int else -1
    current = _pairs(todos)
    found: list[Signal] = []
    previous = state.previous
    if previous is not None:
        found.extend(_compare(previous, current, seq, options))
        if state.asked is not None and state.asked.pending:
            found = _asked_to_drop(found, state.asked)
    run = _run(state.run, current)
    if run is None:
        run_open = False
    elif run[1] == 1:  # a new run: open when this is the first write of a mid-turn fold
        run_open = state.mid_turn
    else:
        run_open = state.run_open
    if run is not None and run[1] == options.stuck_writes:
        found.append(Signal("stuck", seq, (run[0],), run[1], at_least=run_open))
    asked = state.asked
    if asked is not None and asked.pending:
        asked = asked.pending_copy()
        asked.apply(event)  # a write may honour them
    chain = state.found
    for signal in found:
        chain = (signal, chain)
    return HealthState(current, run, chain, run_open=run_open, asked=asked)


def _asked_to_drop(found: list[Signal], asked: _Fold) -> list[Signal]:
    """``found`` without the drops a person asked for (a pending ``remove``)."""
    removing = {
        _match_key(state.request.content)
        for state in asked.pending.values()
        if state.request.kind == "remove"
    }
    kept = []
    for signal in found:
        if signal.kind == "dropped":
            items = tuple(item for item in signal.items if _match_key(item) not in removing)
            if not items:
                continue
            signal = replace(signal, items=items, count=len(items))
        kept.append(signal)
    return kept


def _asked(state: HealthState, event: Mapping[str, Any], kind: object) -> HealthState:
    """A request event, or the end of a turn: what a person asked, and was not honoured."""
    asked = _Fold() if state.asked is None else state.asked.pending_copy()
    if state.asked is None and state.previous is not None:  # the plan a request meets
        asked.apply(
            {
                "type": EVENT_TYPE,
                "seq": -1,
                "data": {"todos": [{"content": c, "status": s} for c, s in state.previous]},
            }
        )
    before = dict(asked.pending)
    asked.apply(event)
    failed = tuple(
        before[ident].request.content
        for ident, now in asked.states.items()
        if ident in before and now.status == "not_honoured"
    )
    seq = event.get("seq", -1)
    seq = seq if type(seq) is int else -1
    chain = state.found
    if failed:
        chain = (Signal("not_honoured", seq, failed, len(failed)), chain)
    return replace(state, found=chain, asked=asked)


def _kind(event: object) -> object:
    """An event's ``type``; ``None`` for what is not a mapping (a plain dict checked first: the
    ABC check costs more than the rest of most steps)."""
    if type(event) is dict or isinstance(event, Mapping):
        return event.get("type")
    return None


def _pairs(todos: list[Any]) -> Pairs:
    """A write's items as (content, status), read once: every comparison works on these."""
    pairs = []
    for item in todos:
        # a plain dict first: the ABC check costs more than the rest of a write's step
        if type(item) is dict or isinstance(item, Mapping):
            content = item.get("content")
            pairs.append((content if type(content) is str else repr(content), item.get("status")))
    return tuple(pairs)


def _compare(previous: Pairs, current: Pairs, seq: int, options: HealthOptions) -> list[Signal]:
    found: list[Signal] = []
    if previous == current:  # the common case of a write that changed nothing: one check
        return [Signal("unchanged", seq)]
    before = dict(previous)
    after = dict(current)
    if not before.keys() <= after.keys():  # an item left: the unfinished ones are dropped
        dropped = [
            c for c, s in before.items() if s in ("pending", "in_progress") and c not in after
        ]
        if dropped:
            found.append(Signal("dropped", seq, tuple(dropped), len(dropped)))
    jumped = []
    done = True  # every item of cur completed: found on the same pass (a fleet folds 100,000s)
    for content, status in after.items():
        if status != "completed":
            done = False
        elif before.get(content) == "pending":
            jumped.append(content)
    if len(jumped) >= options.bulk_completed:
        found.append(Signal("bulk_completed", seq, tuple(jumped), len(jumped)))
    if current and done:
        finished = tuple([c for c in after if before.get(c) != "completed"])
        if len(finished) >= options.all_done_at_once:
            found.append(Signal("all_done_at_once", seq, finished, len(finished)))
    return found


def _run(run: tuple[str, int] | None, current: Pairs) -> tuple[str, int] | None:
    active = [content for content, status in current if status == "in_progress"]
    if run is not None and run[0] in active:
        return (run[0], run[1] + 1)
    if active:
        return (active[0], 1)  # with parallel work allowed, the first one is followed
    return None


def plan_health(
    events: Iterable[Mapping[str, Any]], options: HealthOptions | None = None
) -> list[Signal]:
    """Every signal of a session's events, in log order, across all its turns."""
    found: list[Signal] = []
    state = HealthState()
    chosen = options or HealthOptions()
    for event in events:
        if _kind(event) == TURN_START:
            if state.asked is not None:  # what the ending turn was asked and did not do
                state = _asked(state, event, TURN_START)
            found.extend(state.signals)
        state = step(state, event, chosen)
    found.extend(state.signals)
    return found


def turn_health(
    events: Iterable[Mapping[str, Any]],
    options: HealthOptions | None = None,
    *,
    partial: bool = False,
) -> list[Signal]:
    """The signals of the last turn of ``events`` (what a viewer shows next to the plan).

    ``partial``: ``events`` begin inside the turn (its latest writes, as
    ``fleet.turn_window`` reads a long one), so a ``stuck`` run under way at their first
    write is marked :attr:`Signal.at_least`.
    """
    chosen = options or HealthOptions()
    listed = events if type(events) is list else list(events)
    found = _plain_turn(listed, chosen, partial)
    if found is not None:
        return found
    state = HealthState(mid_turn=partial)
    for event in listed:
        state = step(state, event, chosen)
    return list(state.signals)


def _plain_turn(
    events: list[Mapping[str, Any]], options: HealthOptions, partial: bool
) -> list[Signal] | None:
    """:func:`turn_health` of events that are all plain ``dict`` writes and turn starts (a
    fleet's turns, mostly), folded as :func:`step` folds them but without a state per event;
    ``None`` when any is something else (a request, an end, a broken write): ``step`` then."""
    found: list[Signal] = []
    previous: Pairs | None = None
    run: tuple[str, int] | None = None
    mid_turn, run_open = partial, False
    for event in events:
        kind = event.get("type") if type(event) is dict else None
        if kind == TURN_START:
            found, previous, run, mid_turn, run_open = [], None, None, False, False
            continue
        data = event.get("data") if kind == EVENT_TYPE else None
        todos = data.get("todos") if type(data) is dict else None
        if type(todos) is not list:
            return None
        seq = event.get("seq", -1)
        seq = seq if type(seq) is int else -1
        current = _pairs(todos)
        if previous is not None:
            found.extend(_compare(previous, current, seq, options))
        run = _run(run, current)
        if run is None:
            run_open = False
        elif run[1] == 1:  # a new run: open when this is the first write of a mid-turn fold
            run_open = mid_turn
        if run is not None and run[1] == options.stuck_writes:
            found.append(Signal("stuck", seq, (run[0],), run[1], at_least=run_open))
        previous, mid_turn = current, False
    return found


class HealthProjection:
    """The signals of the current turn as a session projection (``host.projection(s, key)``).

    Register it in a plugin's ``apply`` (``ctx.session_projections.register("health",
    HealthProjection())``); it is not resumable: a host opening an agent on an existing
    log starts it from nothing (use :func:`turn_health` over the log's events instead).
    """

    state_version = 1
    init = HealthState()

    def __init__(self, options: HealthOptions | None = None) -> None:
        self.options = options or HealthOptions()

    def apply(self, state: HealthState, event: Mapping[str, Any]) -> HealthState:
        return step(state, event, self.options)

    def view(self, state: HealthState) -> tuple[Signal, ...]:
        return state.signals


_TEXT = {
    "dropped": "dropped unfinished",
    "bulk_completed": "pending to completed at once",
    "all_done_at_once": "everything left completed at once",
    "stuck": "in progress for {at_least}{count} writes",
    "unchanged": "a write that changed nothing",
    "not_honoured": "asked for and not done by the end of the turn",
}


def describe(signal: Signal) -> str:
    """One line for a person: what happened, to which items, at which seq (not escaped)."""
    at_least = "at least " if signal.at_least else ""
    head = _TEXT[signal.kind].format(count=signal.count, at_least=at_least)
    items = ", ".join(f'"{item}"' for item in signal.items[:3])
    more = f" and {len(signal.items) - 3} more" if len(signal.items) > 3 else ""
    counted = (
        f" ({signal.count})"
        if signal.kind in ("dropped", "bulk_completed", "all_done_at_once", "not_honoured")
        else ""
    )
    body = f": {items}{more}" if items else ""
    return f"{signal.kind}{counted} at seq {signal.seq} - {head}{body}"
