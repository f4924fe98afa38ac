"""`dsh-todo sessions` shows what a person asked of each session in its current turn, and the
``not_honoured`` signal, from the read it makes of each log's turn (JSONL and PostgreSQL)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from dsh_tool_todo.core.contract import EVENT_TYPE, TURN_START
from dsh_tool_todo.stores import open_session
from dsh_tool_todo.stores.requests import PlanRequests
from tests._builders import todo, todos
from tests.cli.test_asked_views import Place, append, asked_and_half_answered
from tests.cli.test_cli import dsh_todo


@pytest.fixture
def place(store_place: str) -> Place:
    return store_place, "ada"


def rows(source: str) -> list[str]:
    """The lines `dsh-todo sessions` prints, sorted, each one's last activity written ``T``."""
    lines = dsh_todo("sessions", source).stdout.splitlines()
    return sorted(re.sub(r"\tlast [^\t]+", "\tlast T", line) for line in lines)


def nodes(source: str) -> dict[str, dict[str, Any]]:
    tree = json.loads(dsh_todo("sessions", source, "--json").stdout)
    return {node["key"]: node for node in tree["sessions"]}


def test_sessions_shows_what_was_asked_this_turn_and_a_request_not_honoured(place: Place) -> None:
    source, _ = place
    append((source, "bob"), EVENT_TYPE, todos(todo("Review")))
    asked_and_half_answered(place)
    assert rows(source) == [
        'ada\t0/3 done\tlast T\tnow: "Write the tests"\tasked: 1 pending, 1 honoured',
        "bob\t0/1 done\tlast T",
    ]
    found = nodes(source)
    assert found["bob"]["asked"] == []
    ship, tell = found["ada"]["asked"]
    assert ship == {
        "id": ship["id"],
        "kind": "done",
        "content": "Ship it",
        "by": "grace",
        "planSeq": 0,
        "at": ship["at"],
        "status": "pending",
        "takenSeq": 1,
        "settledSeq": None,
        "notified": True,
    }
    assert (tell["kind"], tell["status"], tell["takenSeq"], tell["settledSeq"]) == (
        "add",
        "honoured",
        2,
        3,
    )
    assert [ship["id"], tell["id"]] == [s.request.id for s in PlanRequests(*place).read().taken]

    append(place, "turn/end", {})  # "Ship it" was told and is still not done
    assert rows(source)[0] == (
        'ada\t0/3 done\tlast T\tnow: "Write the tests"\tasked: 1 honoured, 1 not_honoured'
        "\t! not_honoured@4"
    )
    assert nodes(source)["ada"]["signals"] == [
        {"kind": "not_honoured", "seq": 4, "items": ["Ship it"], "count": 1}
    ]


@pytest.mark.parametrize("writes", [2, 250])  # a short log read with its row; a long one paged
def test_what_a_turn_start_settled_is_read_back_past_it(place: Place, writes: int) -> None:
    asked_and_half_answered(place)  # seqs 0-3
    with open_session(*place) as agent:
        agent.append(TURN_START, {})  # seq 4: ends the turn the model was told "Ship it" in
        for n in range(writes):
            plan = todos(todo("Write the tests", "in_progress"), todo(f"Note {n}", "completed"))
            agent.append(EVENT_TYPE, plan)
    (ship,) = nodes(place[0])["ada"]["asked"]
    assert (ship["content"], ship["status"], ship["takenSeq"], ship["settledSeq"]) == (
        "Ship it",
        "not_honoured",
        1,
        4,
    )
    assert "\tasked: 1 not_honoured" in rows(place[0])[0]
