"""The web view over a PostgreSQL store: the same list, tail page and push stream as for files."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from psycopg.conninfo import conninfo_to_dict

from dsh_tool_todo.stores import postgres
from dsh_tool_todo.web.app import create_app

from ..stores.conftest import fresh_database
from .conftest import LiveServer, SseStream, run_requests, todo

PLAN = [todo("Read", "completed"), todo("Write", "in_progress"), todo("Test")]


@pytest.fixture
def dsn() -> Iterator[str]:
    """A URL (what ``dsh-todo serve`` takes) of a fresh, set-up database of this test's own."""
    with fresh_database() as conninfo:
        postgres.setup(conninfo)
        params = conninfo_to_dict(conninfo)
        user = f"{params['user']}@" if "user" in params else ""
        yield f"postgresql://{user}{params['host']}:{params['port']}/{params['dbname']}"


def record(dsn: str, session_id: str, *events: tuple[str, dict[str, Any]]) -> None:
    with postgres.PostgresSession(dsn, session_id) as session:
        for kind, data in events:
            session.append(kind, data)


def gets(app: Any, *urls: str) -> list[httpx.Response]:
    async def calls(client: httpx.AsyncClient) -> list[httpx.Response]:
        return [await client.get(url) for url in urls]

    responses: list[httpx.Response] = run_requests(app, calls)
    return responses


def test_sessions_tail_and_projection_come_from_the_table(dsn: str) -> None:
    record(dsn, "agent-1", ("turn/start", {}), ("todo/write", {"todos": PLAN}), ("note", {}))
    record(dsn, "agent-2", ("todo/write", {"todos": [todo("x")]}), ("turn/start", {}))

    listing, tail, only_writes, now, missing = gets(
        create_app(dsn),
        "/api/sessions",
        "/api/sessions/agent-1/events?limit=2",
        "/api/sessions/agent-1/events?types=todo/write",
        "/api/sessions/agent-1/projection",
        "/api/sessions/nobody/events",
    )

    rows = {row["name"]: row for row in listing.json()["sessions"]}
    assert set(rows) == {"agent-1", "agent-2"}
    assert rows["agent-1"]["progress"] == {
        "completed": 1,
        "total": 3,
        "inProgress": 1,
        "cleared": False,
    }
    assert rows["agent-2"]["progress"]["cleared"] is True
    assert [event["seq"] for event in tail.json()["events"]] == [1, 2]
    assert tail.json()["more"] is True
    assert [event["seq"] for event in only_writes.json()["events"]] == [1]
    assert now.json()["plan"] == PLAN
    assert now.json()["seq"] == 2
    assert missing.status_code == 404


def test_a_stream_pushes_appends_and_resumes_after_the_last_id(
    dsn: str, live_server: Callable[..., LiveServer], sse: Callable[..., SseStream]
) -> None:
    record(dsn, "agent-1", ("todo/write", {"todos": [todo("A")]}))
    server = live_server(dsn)
    url = f"{server.url}/api/sessions/agent-1/stream"
    stream = sse(url)
    assert stream.projection().id == "0"

    record_more = postgres.PostgresSession(dsn, "agent-1")
    with record_more as session:
        session.append("todo/write", {"todos": [todo("A", "in_progress")]})
        session.append("turn/start", {})
        pushed = [stream.projection(), stream.projection()]
        resumed = sse(url, {"last-event-id": "1"}).projection()

    assert [(frame.id, frame.json()["cause"]) for frame in pushed] == [
        ("1", "todo/write"),
        ("2", "turn/start"),
    ]
    assert (resumed.id, resumed.json()["plan"]) == ("2", None)
