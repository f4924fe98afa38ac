"""``turn_health``'s fold of plain turns (no state object per event) gives what ``step`` gives.

A fleet folds 100,000 turns, so ``turn_health`` folds a turn of plain ``dict`` writes and
turn starts without building a ``HealthState`` per event, and hands anything else to
``step``; and two writes are compared in one pass. Generated turns of every shape, folded
both ways, must give the same signals; generated pairs of writes, what the definitions give.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_tool_todo.core.contract import EVENT_TYPE, SESSION_END_EVENT_TYPE, TURN_START
from dsh_tool_todo.core.health import (
    HealthOptions,
    HealthState,
    Pairs,
    Signal,
    _compare,
    step,
    turn_health,
)

Event = dict[str, Any]

_ITEM = st.fixed_dictionaries(
    {
        "content": st.sampled_from(["A", "B", "C", "D", "E"]),
        "status": st.sampled_from(["pending", "in_progress", "completed"]),
    }
)
_WRITE = st.builds(
    lambda seq, todos: {"seq": seq, "type": EVENT_TYPE, "data": {"todos": todos}},
    st.integers(-1, 50),
    st.lists(_ITEM, max_size=6),
)
_ODD = st.sampled_from(
    [
        {"seq": 3, "type": SESSION_END_EVENT_TYPE, "data": {"outcome": "finished"}},
        {"seq": 4, "type": "message/user", "data": {}},
        {"seq": 5, "type": EVENT_TYPE, "data": {"todos": "not a list"}},
        {"seq": 6, "type": EVENT_TYPE, "data": []},
        {"seq": "7", "type": EVENT_TYPE, "data": {"todos": [{"content": 1, "status": "x"}]}},
    ]
)
_EVENT = st.one_of(
    _WRITE, _WRITE, _WRITE, st.just({"seq": 0, "type": TURN_START, "data": {}}), _ODD
)
_OPTIONS = st.builds(HealthOptions, st.integers(1, 4), st.integers(1, 4), st.integers(2, 5))


def folded_by_step(events: list[Event], options: HealthOptions, partial: bool) -> list[Signal]:
    state = HealthState(mid_turn=partial)
    for event in events:
        state = step(state, event, options)
    return list(state.signals)


@settings(max_examples=400, deadline=None)
@given(st.lists(_EVENT, max_size=14), _OPTIONS, st.booleans())
def test_a_turn_folds_to_the_signals_step_gives(
    events: list[Event], options: HealthOptions, partial: bool
) -> None:
    assert turn_health(events, options, partial=partial) == folded_by_step(events, options, partial)


@settings(max_examples=100, deadline=None)
@given(st.lists(_WRITE, min_size=1, max_size=8), _OPTIONS, st.booleans())
def test_an_iterator_of_writes_folds_as_its_list(
    events: list[Event], options: HealthOptions, partial: bool
) -> None:
    assert turn_health(iter(events), options, partial=partial) == folded_by_step(
        events, options, partial
    )


def test_a_stuck_run_under_way_at_a_partial_folds_first_write_is_at_least() -> None:
    item = {"content": "A", "status": "in_progress"}
    writes = [{"seq": seq, "type": EVENT_TYPE, "data": {"todos": [item]}} for seq in range(5)]

    def stuck(signals: list[Signal]) -> list[tuple[int, bool]]:
        return [(signal.seq, signal.at_least) for signal in signals if signal.kind == "stuck"]

    assert stuck(turn_health(writes, partial=True)) == [(4, True)]
    assert stuck(turn_health(writes)) == [(4, False)]


def compared_by_definition(
    previous: Pairs, current: Pairs, seq: int, options: HealthOptions
) -> list[Signal]:
    """The signals between two writes, each written out as ``core.health`` defines it."""
    if previous == current:
        return [Signal("unchanged", seq)]
    before, after = dict(previous), dict(current)
    found = []
    dropped = tuple(
        c for c, s in before.items() if s in ("pending", "in_progress") and c not in after
    )
    if dropped:
        found.append(Signal("dropped", seq, dropped, len(dropped)))
    jumped = tuple(c for c, s in after.items() if s == "completed" and before.get(c) == "pending")
    if len(jumped) >= options.bulk_completed:
        found.append(Signal("bulk_completed", seq, jumped, len(jumped)))
    if current and all(s == "completed" for s in after.values()):
        finished = tuple(c for c in after if before.get(c) != "completed")
        if len(finished) >= options.all_done_at_once:
            found.append(Signal("all_done_at_once", seq, finished, len(finished)))
    return found


_PAIRS = st.lists(
    st.tuples(
        st.sampled_from(["A", "B", "C", "D", "E", "F"]),
        st.sampled_from(["pending", "in_progress", "completed", "done", 1, None]),
    ),
    max_size=7,
).map(tuple)


@settings(max_examples=600, deadline=None)
@given(_PAIRS, _PAIRS, _OPTIONS)
def test_two_writes_compare_as_the_definitions_say(
    previous: Pairs, current: Pairs, options: HealthOptions
) -> None:
    assert _compare(previous, current, 9, options) == compared_by_definition(
        previous, current, 9, options
    )
