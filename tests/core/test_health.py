"""Plan-health signals on hand-made histories, and properties over generated ones."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dsh_tool_todo
from dsh_tool_todo.core.contract import EVENT_TYPE, LINK_EVENT_TYPE
from dsh_tool_todo.core.health import (
    HealthOptions,
    HealthProjection,
    Signal,
    describe,
    plan_health,
    turn_health,
)
from dsh_tool_todo.errors import UsageError
from dsh_tool_todo.host import Host
from tests._builders import make_event, todo, todo_write, turn_start

Event = dict[str, Any]


def history(*steps: list[tuple[str, str]] | None) -> list[Event]:
    """A log: each step a todo/write of (content, status) pairs, or None for a turn/start."""
    events: list[Event] = []
    for seq, step in enumerate(steps):
        if step is None:
            events.append(turn_start(seq=seq))
        else:
            events.append(todo_write(*(todo(*pair) for pair in step), seq=seq))
    return events


def kinds(signals: list[Signal]) -> list[tuple[str, int, tuple[str, ...]]]:
    return [(signal.kind, signal.seq, signal.items) for signal in signals]


P, I, C = "pending", "in_progress", "completed"  # noqa: E741 - short as the statuses read


def test_an_unfinished_item_dropped_is_named() -> None:
    log = history([("A", C), ("B", I), ("C", P)], [("A", C)])
    assert kinds(plan_health(log)) == [("dropped", 1, ("B", "C"))]


def test_a_completed_item_left_out_is_no_drop() -> None:
    assert plan_health(history([("A", C), ("B", I)], [("B", I)])) == []


def test_three_pending_items_completed_in_one_write() -> None:
    log = history(
        [("A", I), ("B", P), ("C", P), ("D", P), ("E", P)],
        [("A", I), ("B", C), ("C", C), ("D", C), ("E", P)],
    )
    assert kinds(plan_health(log)) == [("bulk_completed", 1, ("B", "C", "D"))]
    two = history([("B", P), ("C", P), ("D", I)], [("B", C), ("C", C), ("D", I)])
    assert plan_health(two) == []
    assert kinds(plan_health(two, HealthOptions(bulk_completed=2))) == [
        ("bulk_completed", 1, ("B", "C"))
    ]


def test_everything_left_completed_in_one_final_write() -> None:
    log = history([("A", C), ("B", I), ("C", P)], [("A", C), ("B", C), ("C", C)])
    assert kinds(plan_health(log)) == [("all_done_at_once", 1, ("B", "C"))]
    one_left = history([("A", C), ("B", I)], [("A", C), ("B", C)])
    assert plan_health(one_left) == []  # the ordinary last step
    assert kinds(plan_health(one_left, HealthOptions(all_done_at_once=1))) == [
        ("all_done_at_once", 1, ("B",))
    ]


def test_the_same_item_in_progress_for_five_writes_is_stuck_once() -> None:
    steps = [[("A", I), ("B", P), (f"note {n}", C)] for n in range(7)]
    signals = plan_health(history(*steps))
    assert kinds(signals) == [("stuck", 4, ("A",))]
    assert signals[0].count == 5
    assert kinds(plan_health(history(*steps), HealthOptions(stuck_writes=3))) == [
        ("stuck", 2, ("A",))
    ]


def test_a_run_under_way_where_a_partial_fold_begins_is_stuck_at_least() -> None:
    """A long turn's latest writes (what a viewer reads): a run in progress at the first of
    them may have begun earlier, so its count and seq are bounds, and say so."""
    steps = [[("A", I), (f"note {n}", C)] for n in range(7)]
    (signal,) = turn_health(history(*steps), partial=True)
    assert signal == Signal("stuck", 4, ("A",), 5, at_least=True)
    assert describe(signal) == 'stuck at seq 4 - in progress for at least 5 writes: "A"'
    assert signal.as_json() == {
        "kind": "stuck",
        "seq": 4,
        "items": ["A"],
        "count": 5,
        "atLeast": True,
    }
    assert turn_health(history(*steps)) == [Signal("stuck", 4, ("A",), 5)]  # a whole turn
    # a run that begins after the first write read, or after a turn/start, is counted whole
    assert turn_health(history([("A", P)], *steps), partial=True) == [Signal("stuck", 5, ("A",), 5)]
    assert turn_health(history(*steps[:2], None, *steps), partial=True) == [
        Signal("stuck", 7, ("A",), 5)
    ]


def test_a_new_item_in_progress_restarts_the_run() -> None:
    steps = [[("A", I), ("B", P)]] * 3 + [[("A", C), ("B", I)]] * 3
    log = history(*[[*step, (f"n{k}", C)] for k, step in enumerate(steps)])
    assert [s.kind for s in plan_health(log)] == []


def test_a_write_that_changes_nothing() -> None:
    log = history([("A", I), ("B", P)], [("A", I), ("B", P)], [("B", P), ("A", I)])
    assert kinds(plan_health(log)) == [("unchanged", 1, ())]  # reordered: a change


def test_a_turn_start_begins_afresh() -> None:
    log = history([("A", I), ("B", P)], None, [("C", I)], [("C", I)])
    assert kinds(plan_health(log)) == [("unchanged", 3, ())]  # no drop across the turn
    assert kinds(turn_health(log)) == [("unchanged", 3, ())]
    assert turn_health(history([("A", I)], [("A", I)], None)) == []


def test_other_events_and_broken_writes_raise_nothing() -> None:
    log = [
        make_event(LINK_EVENT_TYPE, {"parent": "p"}, seq=0),
        *history([("A", I), ("B", P)]),
        make_event(EVENT_TYPE, {"todos": "not a list"}, seq=9),
        make_event("note", seq=10),
    ]
    assert plan_health(log) == []


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"bulk_completed": 0}, "bulk_completed must be an int of at least 1, not 0"),
        ({"stuck_writes": True}, "stuck_writes must be an int"),
        ({"all_done_at_once": 1.5}, "all_done_at_once must be an int"),
        ({"stuck_writes": 1}, "stuck_writes must be at least 2"),
    ],
)
def test_bad_thresholds_are_refused(options: dict[str, Any], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        HealthOptions(**options)


def test_describe_says_what_happened() -> None:
    signal = Signal("dropped", 4, ("a", "b", "c", "d"), 4)
    assert describe(signal) == (
        'dropped (4) at seq 4 - dropped unfinished: "a", "b", "c" and 1 more'
    )
    assert describe(Signal("stuck", 9, ("x",), 5)) == (
        'stuck at seq 9 - in progress for 5 writes: "x"'
    )


def test_the_projection_matches_the_function_through_a_host() -> None:
    host = Host([dsh_tool_todo], {"dsh-tool-todo": {"allowParallelInProgress": False}})
    host.context.session_projections._sealed = False  # a test-only late registration
    host.context.session_projections.register("health", HealthProjection())
    agent = host.new_agent()
    for plan in ([("A", I), ("B", P)], [("A", I)], [("A", I)]):
        todos = [{"content": c, "status": s} for c, s in plan]
        host.call_tool("todo_write", {"todos": todos}, agent=agent)
    expected = turn_health(agent.session.events)
    assert list(host.projection(agent.session, "health")) == expected
    assert [s.kind for s in expected] == ["dropped", "unchanged"]


# --- generated histories ----------------------------------------------------------------

CONTENTS = st.sampled_from(["a", "b", "c", "d", "e"])
STATUS = st.sampled_from([P, I, C])
PLAN = st.lists(st.tuples(CONTENTS, STATUS), max_size=5, unique_by=lambda pair: pair[0])
STEP = st.one_of(st.none(), PLAN)


@settings(max_examples=300, deadline=None)
@given(st.lists(STEP, max_size=25))
def test_generated_histories_keep_the_definitions(steps: list[Any]) -> None:
    log = history(*steps)
    signals = plan_health(log)
    by_seq = {event["seq"]: event for event in log}
    previous: dict[int, list[tuple[str, str]] | None] = {}
    last: list[tuple[str, str]] | None = None
    for seq, step in enumerate(steps):
        previous[seq] = last
        last = None if step is None else list(step)
    for signal in signals:
        assert by_seq[signal.seq]["type"] == EVENT_TYPE
        before, after = previous[signal.seq], steps[signal.seq]
        if signal.kind != "stuck":
            assert before is not None  # the first write of a turn raises none of these
        statuses_before = dict(before or [])
        statuses_after = dict(after)
        if signal.kind == "dropped":
            assert set(signal.items) == {
                c for c, s in statuses_before.items() if s != C and c not in statuses_after
            }
        elif signal.kind == "bulk_completed":
            assert len(signal.items) >= 3
            assert all(statuses_before[c] == P and statuses_after[c] == C for c in signal.items)
        elif signal.kind == "all_done_at_once":
            assert statuses_after
            assert set(statuses_after.values()) == {C}
        elif signal.kind == "unchanged":
            assert before == after
        elif signal.kind == "stuck":
            assert statuses_after[signal.items[0]] == I
    # every unchanged pair within a turn is reported, and only those
    unchanged = {s.seq for s in signals if s.kind == "unchanged"}
    expected = {
        seq
        for seq, step in enumerate(steps)
        if step is not None and previous[seq] is not None and previous[seq] == step
    }
    assert unchanged == expected
    # the last turn's signals are the tail of all signals
    tail = turn_health(log)
    assert signals[len(signals) - len(tail) :] == tail


def test_a_step_adds_its_signals_without_copying_the_turns_earlier_ones() -> None:
    """A turn of many writes folds in linear time: each step links to the state before it
    (with a copy of every earlier signal per step, 40,000 writes took 12 s)."""
    projection = HealthProjection()
    state = projection.init
    same = todo_write(todo("A", "in_progress"))
    for seq in range(3):
        state = projection.apply(state, {**same, "seq": seq})
    before = state
    after = projection.apply(before, {**same, "seq": 3})

    assert after.found is not None
    assert after.found[1] is before.found
    assert [signal.seq for signal in after.signals] == [1, 2, 3]
    assert projection.view(after) == after.signals


def test_a_long_turn_keeps_every_signal_in_log_order() -> None:
    events = [turn_start(seq=0)] + [
        todo_write(todo("A", "in_progress"), seq=seq) for seq in range(1, 20_001)
    ]
    signals = turn_health(events, HealthOptions(stuck_writes=5))

    unchanged = [signal.seq for signal in signals if signal.kind == "unchanged"]
    assert unchanged == list(range(2, 20_001))
    assert [signal.seq for signal in signals if signal.kind == "stuck"] == [5]


# --- whatever a log holds ---------------------------------------------------------------

JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=12,
)
ITEM = st.fixed_dictionaries(
    {"content": CONTENTS | JSONISH, "status": STATUS | JSONISH}, optional={"id": JSONISH}
)
WRITE_DATA = JSONISH | st.fixed_dictionaries({"todos": st.lists(ITEM | JSONISH, max_size=4)})
# the types health reads, a person's requests and the end of a turn among them
TYPES = [EVENT_TYPE, "turn/start", "turn/end", LINK_EVENT_TYPE, "request/taken"]
TYPES += ["request/withdrawn", "request/notified"]
REQUEST_DATA = st.dictionaries(st.sampled_from(["id", "kind", "content", "by", "note"]), JSONISH)
SHAPED = st.fixed_dictionaries(
    {"type": st.sampled_from(TYPES) | JSONISH},
    optional={"seq": st.integers() | JSONISH, "data": WRITE_DATA | REQUEST_DATA},
)
ANY_EVENT = SHAPED | JSONISH


@settings(max_examples=400, deadline=None)
@given(st.lists(ANY_EVENT, max_size=12))
def test_health_never_raises_on_whatever_a_log_holds(events: list[Any]) -> None:
    """An event that is not an object, or a write the tool could not have recorded, raises
    no signal and no error (a reader refuses such a log; health, given one, passes it by)."""
    signals = plan_health(events)
    tail = turn_health(events)
    assert signals[len(signals) - len(tail) :] == tail
    turn_health(events, partial=True)
    projection = HealthProjection(HealthOptions(stuck_writes=2))
    state = projection.init
    for event in events:
        state = projection.apply(state, event)
    for signal in [*signals, *tail, *projection.view(state)]:
        describe(signal)
        signal.as_json()


@pytest.mark.parametrize(
    "stray", ["a line of text", None, 7, [EVENT_TYPE], {"type": EVENT_TYPE, "data": ["A"]}]
)
def test_an_event_that_is_not_an_object_is_passed_by(stray: Any) -> None:
    log = history([("A", I), ("B", P)], [("A", C)])
    with_stray = [log[0], stray, log[1]]

    assert plan_health(with_stray) == plan_health(log) == [Signal("dropped", 1, ("B",), 1)]
    assert turn_health(with_stray) == turn_health(log)


# --- a person's requests (core.requests) ---------------------------------------------------


def asked_event(ident: str, kind: str, content: str) -> Event:
    data = {"id": ident, "kind": kind, "content": content, "by": "ada", "planSeq": 0, "at": 0.0}
    return make_event("request/taken", data)


def test_a_told_request_the_turn_ends_without_honouring_is_a_signal_of_that_turn() -> None:
    events = [
        {**e, "seq": n}
        for n, e in enumerate(
            [
                todo_write(todo("Ship it"), todo("Docs")),
                asked_event("r1", "done", "Ship it"),
                asked_event("r2", "remove", "Docs"),
                make_event("request/notified", {"ids": ["r1", "r2"]}),
                todo_write(todo("Ship it")),  # honours the removal only
                make_event("turn/end"),
            ]
        )
    ]
    (signal,) = turn_health(events)  # the drop a person asked for is no "dropped" signal
    assert (signal.kind, signal.seq, signal.items, signal.count) == (
        "not_honoured",
        5,
        ("Ship it",),
        1,
    )
    assert describe(signal) == (
        'not_honoured (1) at seq 5 - asked for and not done by the end of the turn: "Ship it"'
    )


def test_a_turn_start_ends_the_asking_turn_and_the_new_turn_starts_clean() -> None:
    events = [
        {**e, "seq": n}
        for n, e in enumerate(
            [
                todo_write(todo("Ship it")),
                asked_event("r1", "done", "Ship it"),
                make_event("request/notified", {"ids": ["r1"]}),
                turn_start(),
                todo_write(todo("Next")),
            ]
        )
    ]
    assert kinds(plan_health(events)) == [("not_honoured", 3, ("Ship it",))]
    assert turn_health(events) == []
    projection = HealthProjection()
    state = projection.init
    for event in events[:3]:
        state = projection.apply(state, event)
    before = state
    for event in events[3:]:
        state = projection.apply(state, event)
    assert projection.view(state) == ()
    assert projection.view(before) == ()  # a state once made never changes


def test_an_untold_request_raises_nothing_and_a_plan_that_has_it_already_honours_it() -> None:
    events = [
        {**e, "seq": n}
        for n, e in enumerate(
            [
                todo_write(todo("Ship it", "completed")),
                asked_event("r1", "done", "Ship it"),
                asked_event("r2", "add", "Docs"),
                make_event("turn/end"),
            ]
        )
    ]
    assert turn_health(events) == []
