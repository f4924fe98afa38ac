"""plans/_pending.py: the requests a log leaves pending, followed event by event, are those the
fold of the whole log leaves pending, though only a few events are kept."""

from __future__ import annotations

from typing import Any
from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_tool_todo.core.requests import Request, request_states
from dsh_tool_todo.plans._pending import MAX_PENDING, MAX_SETTLED, PendingRequests

ITEMS = ("a", "b", "c")
STATUSES = ("pending", "in_progress", "completed")
KINDS = ("done", "reopen", "remove", "add", "note")

step = st.one_of(
    st.tuples(st.just("write"), st.dictionaries(st.sampled_from(ITEMS), st.sampled_from(STATUSES))),
    st.tuples(st.just("take"), st.sampled_from(KINDS), st.sampled_from(ITEMS)),
    st.tuples(st.just("notify"), st.lists(st.integers(0, 9), max_size=3)),
    st.tuples(st.just("withdraw"), st.integers(0, 9)),
    st.tuples(st.sampled_from(("turn/start", "turn/end"))),
)


def log_of(steps: list[tuple[Any, ...]]) -> list[dict[str, Any]]:
    """The events the steps make, seq by seq; each request names the plan it was filed on."""
    events: list[dict[str, Any]] = []
    deciding, taken = -1, 0
    for seq, (kind, *rest) in enumerate(steps):
        if kind == "write":
            todos = [{"content": c, "status": s} for c, s in rest[0].items()]
            events.append({"seq": seq, "type": "todo/write", "data": {"todos": todos}})
            deciding = seq
        elif kind == "take":
            data = {"id": f"r{taken}", "kind": rest[0], "content": rest[1], "by": "ada"}
            events.append(
                {
                    "seq": seq,
                    "type": "request/taken",
                    "data": {**data, "planSeq": deciding, "at": 0},
                }
            )
            taken += 1
        elif kind == "notify":
            ids = [f"r{n}" for n in rest[0]]
            events.append({"seq": seq, "type": "request/notified", "data": {"ids": ids}})
        elif kind == "withdraw":
            events.append({"seq": seq, "type": "request/withdrawn", "data": {"id": f"r{rest[0]}"}})
        else:
            events.append({"seq": seq, "type": kind, "data": {}})
            deciding = seq if kind == "turn/start" else deciding
    return events


@settings(max_examples=300, deadline=None)
@given(st.lists(step, max_size=40))
def test_followed_event_by_event_it_is_the_fold_of_the_whole_log(steps: list[Any]) -> None:
    events = log_of(steps)
    pending = PendingRequests()
    for n, event in enumerate(events, 1):
        pending.add(event)
        whole = [s.request.as_json() for s in request_states(events[:n]) if s.status == "pending"]
        whole = whole[-MAX_PENDING:]
        assert pending.pending() == whole


def test_it_keeps_only_what_can_still_change_an_answer() -> None:
    pending = PendingRequests()
    steps: list[tuple[Any, ...]] = [("write", {"a": "pending"})] * 500
    for event in log_of([*steps, *[("take", "note", "a"), ("notify", [])] * 200]):
        if event["type"] == "request/notified":
            event["data"]["ids"] = [f"r{n}" for n in range(200)]
        pending.add(event)
    assert pending._fold.states == {}  # every note delivered: none is kept in the fold
    assert len(pending.asked()) == MAX_SETTLED


def test_each_event_costs_what_the_pending_requests_do_not_the_log_before_it() -> None:
    """Folding again every event kept for the pending requests, as each came, made a log of
    many pending requests cost their square (2,000 took seconds)."""
    calls = 0
    real = Request.from_json

    def counted(data: object) -> Request | None:
        nonlocal calls
        calls += 1
        return real(data)

    steps = [("write", {"a": "pending"}), *[("take", "add", "b")] * 2000]
    events = log_of(steps)
    for n, event in enumerate(events[1:]):
        event["data"]["content"] = f"item {n}"
    pending = PendingRequests()
    with mock.patch.object(Request, "from_json", counted):
        for event in events:
            pending.add(event)
    assert [r["content"] for r in pending.pending()] == [f"item {n}" for n in range(1980, 2000)]
    assert calls <= 3 * 2000


def test_an_event_handed_twice_or_of_another_kind_changes_nothing() -> None:
    pending = PendingRequests()
    (write, turn) = log_of([("write", {"a": "pending"}), ("turn/start",)])
    assert pending.add(write)
    assert pending.add(turn)
    assert not pending.add(write)  # older than the newest handed in
    assert not pending.add({"seq": 9, "type": "link/child", "data": {}})
    assert pending.add({"seq": 10, "type": "turn/end", "data": {}})


def _asked_of_whole(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What was asked in the current turn, by the fold of the whole log."""
    starts = [e["seq"] for e in events if e["type"] == "turn/start"]
    since = starts[-1] if starts else -1
    states = request_states(events)
    settled = [s for s in states if s.status != "pending" and (s.settled_seq or 0) >= since]
    settled = sorted(settled, key=lambda s: s.settled_seq or 0)[-MAX_SETTLED:]
    pending = [s for s in states if s.status == "pending"][-MAX_PENDING:]
    return [s.as_json() for s in sorted([*settled, *pending], key=lambda s: s.taken_seq)]


@settings(max_examples=300, deadline=None)
@given(st.lists(step, max_size=60))
def test_what_was_asked_this_turn_followed_event_by_event_is_the_fold_of_the_whole_log(
    steps: list[Any],
) -> None:
    events = log_of(steps)
    pending = PendingRequests()
    for n, event in enumerate(events, 1):
        pending.add(event)
        assert pending.asked() == _asked_of_whole(events[:n])


def test_a_turn_start_lets_go_of_what_was_settled_before_it_and_shows_what_lapsed_at_it() -> None:
    pending = PendingRequests()
    steps = [
        ("write", {"a": "pending", "b": "pending"}),
        ("take", "done", "a"),  # r0
        ("write", {"a": "completed", "b": "pending"}),  # honours r0
        ("take", "done", "b"),  # r1: not told, lapses at the turn's start
        ("turn/start",),
    ]
    events = log_of(steps)
    for event in events[:3]:
        pending.add(event)
    assert [(r["id"], r["status"]) for r in pending.asked()] == [("r0", "honoured")]
    for event in events[3:]:
        pending.add(event)
    assert [(r["id"], r["status"]) for r in pending.asked()] == [("r1", "void")]


def test_at_most_the_newest_settled_are_shown() -> None:
    pending = PendingRequests()
    steps: list[tuple[Any, ...]] = [("write", {"a": "pending"})]
    for _ in range(MAX_SETTLED + 5):
        steps += [("take", "note", "a"), ("notify", [])]
    events = log_of(steps)
    for n, event in enumerate(events):
        if event["type"] == "request/notified":
            event["data"]["ids"] = [f"r{(n - 2) // 2}"]
        pending.add(event)
    asked = pending.asked()
    assert len(asked) == MAX_SETTLED
    assert (asked[-1]["id"], asked[-1]["status"]) == (f"r{MAX_SETTLED + 4}", "delivered")
