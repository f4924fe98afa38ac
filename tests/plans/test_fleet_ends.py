"""`dsh-todo sessions` shows how each delegated run ended (``session/end``), JSONL and PostgreSQL.

The end rides on the read the fleet already makes of each log's current turn (its plan
events, read back from the end): no summary column, no schema change, the same in every store.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from dsh_tool_todo.core.contract import EVENT_TYPE, SESSION_END_EVENT_TYPE
from dsh_tool_todo.core.links import end_data
from dsh_tool_todo.stores import postgres
from dsh_tool_todo.stores.jsonl import JsonlSession
from dsh_tool_todo.stores.postgres import PostgresSession
from tests._builders import todo, todos
from tests.cli.test_cli import dsh_todo
from tests.stores.conftest import fresh_database
from tests.stores.postgres.test_admin import url

Opener = Callable[..., Any]  # (name, parent=None) -> a store session, closed by its `with`

HOSTILE = "quota\x1b[31m exceeded\n"


@pytest.fixture(params=["jsonl", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, Opener]]:
    """Where the sessions go (the SOURCE `dsh-todo sessions` takes) and how one is opened."""
    if request.param == "jsonl":
        yield str(tmp_path), lambda name, **link: JsonlSession(tmp_path / f"{name}.jsonl", **link)
        return
    with fresh_database() as dsn:
        postgres.setup(dsn)
        yield url(dsn), lambda name, **link: PostgresSession(dsn, name, **link)


def record(
    open_session: Opener, name: str, *steps: tuple[str, dict[str, Any]], **link: Any
) -> None:
    with open_session(name, **link) as session:
        for kind, data in steps:
            session.append(kind, data)


def test_sessions_shows_each_sub_agents_end_and_a_run_started_again(
    store: tuple[str, Opener],
) -> None:
    source, open_session = store
    plan = (EVENT_TYPE, todos(todo("Search", "in_progress")))
    done = (EVENT_TYPE, todos(todo("Search", "completed")))
    record(open_session, "lead", (EVENT_TYPE, todos(todo("Delegate", "in_progress"))))
    record(
        open_session,
        "w1",
        plan,
        done,
        (SESSION_END_EVENT_TYPE, end_data("finished")),
        parent="lead",
        parent_call_id="c1",
    )
    record(
        open_session,
        "w2",
        plan,
        (SESSION_END_EVENT_TYPE, end_data("failed", HOSTILE)),
        parent="lead",
        parent_call_id="c2",
    )
    # a durable engine's retry of the same call writes again after the end: running again
    record(
        open_session,
        "w3",
        plan,
        (SESSION_END_EVENT_TYPE, end_data("failed", "x")),
        plan,
        parent="lead",
        parent_call_id="c3",
    )

    rows = [line.split("\t") for line in dsh_todo("sessions", source).stdout.splitlines()]
    by_name = {row[0].strip(): row for row in rows}
    assert rows[0][0] == "lead"
    assert by_name["w1"][1:3] == ["1/1 done", "finished"]
    assert by_name["w2"][1:3] == ["0/1 done", "failed: quota\\x1b[31m exceeded\\n"]
    assert by_name["w2"][3].startswith("last ")
    assert by_name["w3"][2].startswith("last ")  # no end shown
    assert by_name["w3"][3] == 'now: "Search"'
    assert len(by_name["lead"]) == 4  # progress, last, now: no end

    (lead,) = json.loads(dsh_todo("sessions", source, "--json").stdout)["sessions"]
    ends = {child["key"]: child["end"] for child in lead["children"]}
    assert ends == {
        "w1": {"outcome": "finished"},
        "w2": {"outcome": "failed", "error": HOSTILE},  # JSON carries it as it is
        "w3": None,
    }
    assert lead["end"] is None
    assert {child["key"]: child["inProgress"] for child in lead["children"]}["w2"] == ["Search"]
