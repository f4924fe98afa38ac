"""A person's requests: how each is checked, and how the log settles it, on hand-made and
generated histories."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_tool_todo.core.contract import (
    REQUEST_NOTIFIED,
    REQUEST_TAKEN,
    REQUEST_WITHDRAWN,
)
from dsh_tool_todo.core.projection import replay
from dsh_tool_todo.core.requests import Request, _check_request, request_states
from dsh_tool_todo.errors import UsageError
from tests._builders import make_event, todo, todo_write, turn_start

Event = dict[str, Any]
PLAN = [todo("Write the tests", "completed"), todo("Ship it")]


def asked(ident: str, kind: str, content: str, plan_seq: int = 0) -> dict[str, Any]:
    return {
        "id": ident,
        "kind": kind,
        "content": content,
        "by": "ada",
        "planSeq": plan_seq,
        "at": 1.0,
    }


def numbered(*events: Event) -> list[Event]:
    return [{**event, "seq": seq} for seq, event in enumerate(events)]


def statuses(events: list[Event]) -> list[tuple[str, str, int | None]]:
    return [(s.request.id, s.status, s.settled_seq) for s in request_states(events)]


# --- filing -----------------------------------------------------------------------------


def test_a_request_is_checked_against_the_plan_now() -> None:
    assert _check_request("done", " ship  it ", "ada", PLAN) == ("done", "ship  it", "ada")
    assert _check_request("reopen", "Write the tests", "ada", PLAN)[0] == "reopen"
    assert _check_request("add", "Tell the team", "ada", PLAN)[0] == "add"
    assert _check_request("note", "use staging", "ada", None)[0] == "note"


@pytest.mark.parametrize(
    ("kind", "content", "by", "match"),
    [
        ("finish", "Ship it", "ada", "kind is one of done, reopen, remove, add, note"),
        ("done", "", "ada", "needs the item's content"),
        ("note", "  ", "ada", "needs the note's text"),
        ("done", "Deploy", "ada", "the plan has no item 'Deploy'"),
        ("done", "Write the tests", "ada", "completed already"),
        ("reopen", "Ship it", "ada", "nothing to reopen"),
        ("add", "SHIP IT", "ada", "already has 'SHIP IT'"),
        ("remove", "Ship it", "", "names who asks"),
        ("note", "x" * 301, "ada", "at most 300 characters, not 301"),
        ("note", "a\x00b", "ada", "NUL or a lone surrogate"),
        ("note", "a\ud800b", "ada", "NUL or a lone surrogate"),
        ("note", "hi", "b" * 65, "by is at most 64 characters"),
    ],
)
def test_a_request_that_cannot_be_honoured_is_refused(
    kind: str, content: str, by: str, match: str
) -> None:
    with pytest.raises(UsageError, match=match):
        _check_request(kind, content, by, PLAN)


def test_with_no_plan_only_an_addition_or_a_note_can_be_asked() -> None:
    with pytest.raises(UsageError, match="the plan has no item"):
        _check_request("done", "Ship it", "ada", None)
    assert _check_request("add", "Ship it", "ada", None)[0] == "add"


# --- settling ---------------------------------------------------------------------------


def test_each_kind_is_honoured_by_the_first_write_that_has_it() -> None:
    log = numbered(
        todo_write(*PLAN),
        make_event(REQUEST_TAKEN, asked("d", "done", "ship it")),
        make_event(REQUEST_TAKEN, asked("r", "reopen", "Write the tests")),
        make_event(REQUEST_TAKEN, asked("x", "remove", "Ship it")),
        make_event(REQUEST_TAKEN, asked("a", "add", "Tell the team")),
        todo_write(todo("Write the tests", "in_progress"), todo("Ship it", "completed")),
        todo_write(todo("Write the tests"), todo("Tell  the TEAM")),
    )
    assert statuses(log) == [
        ("d", "honoured", 5),
        ("r", "honoured", 5),
        ("x", "honoured", 6),
        ("a", "honoured", 6),
    ]


def test_a_plan_that_has_it_already_honours_a_request_when_it_is_taken() -> None:
    log = numbered(
        todo_write(todo("Ship it", "completed")),
        make_event(REQUEST_TAKEN, asked("d", "done", "Ship it")),
    )
    assert statuses(log) == [("d", "honoured", 1)]


def test_a_told_request_still_unmatched_when_the_turn_ends_is_not_honoured() -> None:
    log = numbered(
        todo_write(*PLAN),
        make_event(REQUEST_TAKEN, asked("d", "done", "Ship it")),
        make_event(REQUEST_NOTIFIED, {"ids": ["d"]}),
        todo_write(*PLAN),
        make_event("turn/end"),
        todo_write(todo("Ship it", "completed")),
    )
    assert statuses(log) == [("d", "not_honoured", 4)]


def test_a_turn_start_voids_untold_item_requests_and_carries_additions_and_notes() -> None:
    log = numbered(
        todo_write(*PLAN),
        make_event(REQUEST_TAKEN, asked("d", "done", "Ship it")),
        make_event(REQUEST_TAKEN, asked("a", "add", "Tell the team")),
        make_event(REQUEST_TAKEN, asked("n", "note", "use staging")),
        make_event(REQUEST_TAKEN, asked("t", "remove", "Ship it")),
        make_event(REQUEST_NOTIFIED, {"ids": ["t"]}),
        turn_start(),
        make_event(REQUEST_NOTIFIED, {"ids": ["a", "n"]}),
        todo_write(todo("Tell the team")),
    )
    assert statuses(log) == [
        ("d", "void", 6),
        ("a", "honoured", 8),
        ("n", "delivered", 7),
        ("t", "not_honoured", 6),
    ]


def test_a_request_filed_against_a_plan_a_turn_cleared_is_void_when_taken() -> None:
    log = numbered(
        todo_write(*PLAN),
        turn_start(),
        make_event(REQUEST_TAKEN, asked("d", "done", "Ship it", plan_seq=0)),
        make_event(REQUEST_TAKEN, asked("a", "add", "Ship it", plan_seq=0)),
    )
    assert statuses(log) == [("d", "void", 2), ("a", "pending", None)]


def test_a_withdrawn_request_is_settled_once_and_a_second_take_changes_nothing() -> None:
    log = numbered(
        todo_write(*PLAN),
        make_event(REQUEST_TAKEN, asked("d", "done", "Ship it")),
        make_event(REQUEST_WITHDRAWN, {"id": "d", "by": "ada"}),
        make_event(REQUEST_TAKEN, asked("d", "remove", "Ship it")),
        todo_write(todo("Ship it", "completed")),
        make_event(REQUEST_WITHDRAWN, {"id": "d", "by": "ada"}),
    )
    assert statuses(log) == [("d", "withdrawn", 2)]


@pytest.mark.parametrize(
    "data",
    [
        None,
        [],
        "x",
        {"id": "", "kind": "done"},
        {**asked("i", "done", "A"), "planSeq": True},
        {**asked("i", "done", "A"), "at": 10**400},  # no float holds it
    ],
)
def test_a_malformed_request_event_is_skipped(data: Any) -> None:
    log = [*numbered(todo_write(*PLAN), make_event(REQUEST_TAKEN, data), {"type": 5}), "junk"]
    assert request_states(log) == []


def test_request_events_never_change_the_plan() -> None:
    with_requests = numbered(
        todo_write(*PLAN),
        make_event(REQUEST_TAKEN, asked("d", "done", "Ship it")),
        make_event(REQUEST_NOTIFIED, {"ids": ["d"]}),
        make_event(REQUEST_WITHDRAWN, {"id": "d"}),
    )
    assert replay(with_requests) == replay(with_requests[:1])


# --- properties -------------------------------------------------------------------------

CONTENTS = ["Ship it", "ship it", "Test", "Docs"]
step = st.one_of(
    st.tuples(
        st.just("write"),
        st.lists(
            st.tuples(
                st.sampled_from(CONTENTS[1:]),
                st.sampled_from(["pending", "in_progress", "completed"]),
            ),
            max_size=3,
            unique_by=lambda p: p[0],
        ),
    ),
    st.tuples(
        st.just("take"),
        st.tuples(
            st.sampled_from("abcd"),
            st.sampled_from(["done", "reopen", "remove", "add", "note"]),
            st.sampled_from(CONTENTS),
        ),
    ),
    st.tuples(st.just("notify"), st.lists(st.sampled_from("abcd"), max_size=3)),
    st.tuples(st.just("withdraw"), st.sampled_from("abcd")),
    st.tuples(st.just("turn/start"), st.none()),
    st.tuples(st.just("turn/end"), st.none()),
)


def generated(steps: list[tuple[str, Any]]) -> list[Event]:
    events: list[Event] = []
    for kind, arg in steps:
        if kind == "write":
            events.append(todo_write(*(todo(c, s) for c, s in arg)))
        elif kind == "take":
            events.append(
                make_event(REQUEST_TAKEN, asked(arg[0], arg[1], arg[2], plan_seq=len(events) - 1))
            )
        elif kind == "notify":
            events.append(make_event(REQUEST_NOTIFIED, {"ids": arg}))
        elif kind == "withdraw":
            events.append(make_event(REQUEST_WITHDRAWN, {"id": arg}))
        else:
            events.append(make_event(kind))
    return numbered(*events)


@settings(max_examples=300, deadline=None)
@given(st.lists(step, max_size=25))
def test_every_request_is_settled_at_most_once_and_never_unsettled(
    steps: list[tuple[str, Any]],
) -> None:
    log = generated(steps)
    settled: dict[str, tuple[str, int | None]] = {}
    for end in range(len(log) + 1):
        for state in request_states(log[:end]):
            before = settled.get(state.request.id)
            if before is not None:
                assert state.status == before[0]
                assert state.settled_seq == before[1]
            elif state.status != "pending":
                assert state.settled_seq is not None
                assert state.settled_seq < end
                settled[state.request.id] = (state.status, state.settled_seq)
    states = request_states(log)
    assert [s.request.id for s in states] == list(dict.fromkeys(s.request.id for s in states))


@settings(max_examples=200, deadline=None)
@given(st.lists(step, max_size=25))
def test_the_plan_is_only_ever_what_the_agent_wrote(steps: list[tuple[str, Any]]) -> None:
    log = generated(steps)
    agent_only = [e for e in log if not e["type"].startswith("request/")]
    assert replay(log) == replay(agent_only)


def test_a_request_round_trips_through_json() -> None:
    request = Request("r1", "add", "Ship it", "ada", 3, 2.5)
    assert Request.from_json(request.as_json()) == request
    assert Request.from_json({**request.as_json(), "at": float("nan")}) is None


def test_the_recent_events_are_read_back_a_bounded_stretch_of_the_log(tmp_path: Path) -> None:
    """A log of other events was read back to its start for its few requests (a session's
    stream opened in seconds)."""
    import json

    from dsh_tool_todo.core.requests import RECENT_LOOK, recent_events
    from dsh_tool_todo.stores._log_file import FileTail

    events = [turn_start(), todo_write(*PLAN), make_event(REQUEST_TAKEN, asked("d", "add", "B"))]
    events += [make_event("message/assistant", {"text": "thinking"})] * (3 * RECENT_LOOK)
    events += [todo_write(*PLAN)]
    log = tmp_path / "a.jsonl"
    log.write_text("".join(json.dumps(e) + "\n" for e in numbered(*events)))
    found = asyncio.run(recent_events(FileTail(str(log)), "a"))
    assert [event["type"] for event in found] == ["todo/write"]  # not the request
