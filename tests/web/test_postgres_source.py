"""The web view over a PostgreSQL store: the same list, tail page and push stream as for files."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from dsh_tool_todo.core.contract import EVENT_TYPE
from dsh_tool_todo.stores import open_reader, postgres
from dsh_tool_todo.web.app import create_app

from ..stores.conftest import fresh_database
from ._readers import (
    Append,
    Events,
    Spied,
    check_a_row_carries_how_its_run_ended,
    check_a_stuck_run_older_than_the_window_says_at_least,
    check_a_turn_ended_without_honouring_a_request_shows_it,
    check_signals_are_read_again_only_after_a_plan_event,
    check_signals_not_read_yet_are_pending,
    leave_after_first_frame,
)
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


@pytest.fixture
def agent_stream(
    dsn: str, live_server: Callable[..., LiveServer], sse: Callable[..., SseStream]
) -> SseStream:
    """The stream of session ``agent-1``, whose one write of ``PLAN`` it has sent."""
    record(dsn, "agent-1", (EVENT_TYPE, {"todos": PLAN}))
    stream = sse(f"{live_server(dsn).url}/api/sessions/agent-1/stream")
    assert stream.projection().id == "0"
    return stream


def gets(app: Any, *urls: str) -> list[httpx.Response]:
    async def calls(client: httpx.AsyncClient) -> list[httpx.Response]:
        return [await client.get(url) for url in urls]

    responses: list[httpx.Response] = run_requests(app, calls)
    return responses


def test_sessions_tail_and_projection_come_from_the_table(dsn: str) -> None:
    record(dsn, "agent-1", ("turn/start", {}), (EVENT_TYPE, {"todos": PLAN}), ("note", {}))
    record(dsn, "agent-2", (EVENT_TYPE, {"todos": [todo("x")]}), ("turn/start", {}))

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
    record(dsn, "agent-1", (EVENT_TYPE, {"todos": [todo("A")]}))
    server = live_server(dsn)
    url = f"{server.url}/api/sessions/agent-1/stream"
    stream = sse(url)
    assert stream.projection().id == "0"

    record_more = postgres.PostgresSession(dsn, "agent-1")
    with record_more as session:
        session.append(EVENT_TYPE, {"todos": [todo("A", "in_progress")]})
        session.append("turn/start", {})
        pushed = [stream.projection(), stream.projection()]
        resumed = sse(url, {"last-event-id": "1"}).projection()

    assert [(frame.id, frame.json()["cause"]) for frame in pushed] == [
        ("1", EVENT_TYPE),
        ("2", "turn/start"),
    ]
    assert (resumed.id, resumed.json()["plan"]) == ("2", None)


def insert_row(dsn: str, session_id: str, seq: int, kind: str = "note", text: str = "{}") -> None:
    with psycopg.Connection.connect(dsn, autocommit=True) as conn:
        conn.execute(
            f"INSERT INTO {postgres.TABLE} (session_id, seq, type, data) VALUES (%s, %s, %s, %s)",
            (session_id, seq, kind, text),
        )


def test_a_session_id_the_view_cannot_address_leaves_the_rest_of_the_list(dsn: str) -> None:
    record(dsn, "agent-1", (EVENT_TYPE, {"todos": PLAN}))
    insert_row(dsn, "tab\there", 0)
    insert_row(dsn, "x" * 201, 0)
    (listing,) = gets(create_app(dsn), "/api/sessions")
    assert listing.status_code == 200, listing.text
    assert [row["name"] for row in listing.json()["sessions"]] == ["agent-1"]


def test_a_filtered_tail_page_reads_a_bounded_stretch_and_gives_a_cursor_to_go_on(
    dsn: str,
) -> None:
    record(dsn, "agent-1", (EVENT_TYPE, {"todos": PLAN}))
    with psycopg.Connection.connect(dsn, autocommit=True) as conn:  # 5,000 rows of another type
        conn.execute(
            f"INSERT INTO {postgres.TABLE} (session_id, seq, type, data) "
            "SELECT 'agent-1', n, 'note', '{}' FROM generate_series(1, 5000) AS n"
        )

    from dsh_tool_todo.stores.postgres.reader import TYPE_SCAN, PostgresReader

    async def direct() -> list[tuple[list[int], bool, int | None]]:
        reader = PostgresReader(dsn)
        try:
            result = []
            before: int | None = None
            while True:
                page = await reader.tail("agent-1", before=before, limit=1, types={EVENT_TYPE})
                result.append(([e["seq"] for e in page.events], page.more, page.cursor))
                if not page.more:
                    return result
                before = page.cursor
        finally:
            await reader.aclose()

    walked = asyncio.run(direct())
    assert walked[0] == ([], True, 5001 - TYPE_SCAN)  # the first page looked at TYPE_SCAN rows
    assert walked[-1] == ([0], False, None)
    assert len(walked) == -(-5001 // TYPE_SCAN)  # every row looked at once


def test_the_view_keeps_the_urls_own_options(dsn: str) -> None:
    with psycopg.Connection.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA agents")
    in_agents = f"{dsn}?options=-csearch_path%3Dagents"
    postgres.setup(in_agents)
    record(in_agents, "agent-9", (EVENT_TYPE, {"todos": PLAN}))
    listing, now = gets(create_app(in_agents), "/api/sessions", "/api/sessions/agent-9/projection")
    assert listing.status_code == 200, listing.text
    assert [row["name"] for row in listing.json()["sessions"]] == ["agent-9"]
    assert now.json()["plan"] == PLAN


def test_a_database_without_the_table_says_to_run_db_init(dsn: str) -> None:
    with psycopg.Connection.connect(dsn, autocommit=True) as conn:
        conn.execute(f"DROP TABLE {postgres.TABLE}")
    (listing,) = gets(create_app(dsn), "/api/sessions")
    assert listing.status_code == 503
    assert "dsh-todo db init" in listing.json()["error"]
    assert "cannot be reached" not in listing.json()["error"]


def test_a_session_deleted_and_written_again_under_a_stream_sends_a_fresh_snapshot(
    dsn: str, live_server: Callable[..., LiveServer], sse: Callable[..., SseStream]
) -> None:
    old = [(EVENT_TYPE, {"todos": [todo("Old")]}), *[("note", {})] * 4]
    record(dsn, "agent-1", *old)
    server = live_server(dsn)
    stream = sse(f"{server.url}/api/sessions/agent-1/stream")
    assert stream.projection().json()["plan"] == [todo("Old")]
    new = [(EVENT_TYPE, {"todos": [todo("New")]}), ("note", {})]  # shorter than the old
    # deleted and written again in one transaction, so the view never sees it absent
    with psycopg.Connection.connect(dsn) as conn, conn.transaction():
        conn.execute(f"DELETE FROM {postgres.TABLE} WHERE session_id = 'agent-1'")
        for seq, (kind, data) in enumerate(new):
            conn.execute(
                f"INSERT INTO {postgres.TABLE} (session_id, seq, type, data) "
                "VALUES ('agent-1', %s, %s, %s)",
                (seq, kind, json.dumps(data)),
            )
        conn.execute("SELECT pg_notify(%s, %s)", (postgres.CHANNEL, "1:agent-1"))
    fresh = stream.projection()
    assert (fresh.id, fresh.json()["plan"]) == ("1", [todo("New")])


def test_a_resume_into_a_session_deleted_and_written_again_gets_the_new_plan(
    dsn: str, live_server: Callable[..., LiveServer], sse: Callable[..., SseStream]
) -> None:
    record(
        dsn,
        "agent-1",
        ("turn/start", {}),
        *[(EVENT_TYPE, {"todos": [todo(f"old {n}")]}) for n in range(5)],
    )
    server = live_server(dsn)
    url = f"{server.url}/api/sessions/agent-1/stream"
    first = sse(url).projection()
    assert first.json()["plan"] == [todo("old 4")]
    assert first.full_id is not None
    postgres.delete_session(dsn, "agent-1")
    record(
        dsn,
        "agent-1",
        ("turn/start", {}),
        (EVENT_TYPE, {"todos": [todo("NEW")]}),
        *[("turn/end", {})] * 8,
    )

    resumed = sse(url, {"last-event-id": first.full_id}).projection()

    assert (resumed.id, resumed.json()["cause"], resumed.json()["plan"]) == (
        "9",
        "snapshot",
        [todo("NEW")],
    )


def test_a_store_error_mid_stream_reaches_the_client_as_a_fatal_frame(
    dsn: str, agent_stream: SseStream
) -> None:
    stream = agent_stream
    with psycopg.Connection.connect(dsn, autocommit=True) as conn:
        conn.execute(f"ALTER TABLE {postgres.TABLE} RENAME TO renamed")
        conn.execute("SELECT pg_notify(%s, %s)", (postgres.CHANNEL, "1:agent-1"))
    frame = stream.named_event()
    assert frame.event == "fatal"
    assert "dsh-todo db init" in frame.json()["error"]


def test_a_view_connection_the_server_terminated_is_replaced_not_reported(dsn: str) -> None:
    """pg_terminate_backend (a failover, an idle-connection reaper) must not fail the next read:
    a stream that met it ended with a fatal frame, and the page stopped asking for good."""
    record(dsn, "agent-1", (EVENT_TYPE, {"todos": PLAN}))
    dbname = conninfo_to_dict(dsn)["dbname"]

    async def reads() -> tuple[Any, Any]:
        reader = postgres.PostgresReader(dsn)
        try:
            before = await reader.snapshot("agent-1")
            with psycopg.Connection.connect(dsn, autocommit=True) as admin:
                killed = admin.execute(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                    "WHERE datname = %s AND pid <> pg_backend_pid()",
                    (dbname,),
                ).fetchone()
            assert killed is not None
            assert killed[0] >= 1
            await asyncio.sleep(0.2)
            return before, await reader.snapshot("agent-1")
        finally:
            await reader.aclose()

    before, after = asyncio.run(reads())
    assert after == before


def test_a_foreign_row_at_the_largest_seq_is_seen_alike_by_the_snapshot_and_the_tail(
    dsn: str,
) -> None:
    insert_row(dsn, "far", 2**63 - 1, EVENT_TYPE, json.dumps({"todos": [todo("x")]}))
    snapshot, tail = gets(
        create_app(dsn), "/api/sessions/far/projection", "/api/sessions/far/events"
    )
    assert snapshot.status_code == 200, snapshot.text
    assert tail.status_code == snapshot.status_code, tail.text


def test_a_session_deleted_under_a_stream_ends_it_with_a_fatal_frame(
    dsn: str, agent_stream: SseStream
) -> None:
    stream = agent_stream
    postgres.delete_session(dsn, "agent-1")
    frame = stream.named_event()
    assert frame.event == "fatal"
    assert frame.json()["error"] == "session 'agent-1': its log was deleted"


def test_an_unknown_session_streams_nothing_but_a_404(dsn: str) -> None:
    record(dsn, "agent-1", (EVENT_TYPE, {"todos": PLAN}))
    (missing, resumed) = gets(
        create_app(dsn),
        "/api/sessions/nobody/stream",
        "/api/sessions/nobody/stream?after=3",
    )
    assert [missing.status_code, resumed.status_code] == [404, 404]
    assert missing.json() == {"error": "no session 'nobody' is served"}


@pytest.mark.parametrize("form", ["ag-ui", "ai-sdk"])
def test_the_other_forms_of_the_stream_follow_a_session_deleted_and_written_again(
    dsn: str, live_server: Callable[..., LiveServer], sse: Callable[..., SseStream], form: str
) -> None:
    record(dsn, "agent-1", (EVENT_TYPE, {"todos": [todo("Old")]}), ("note", {}), ("note", {}))
    stream = sse(f"{live_server(dsn).url}/api/sessions/agent-1/stream?format={form}")
    frames = [stream.next() for _ in range(4 if form == "ag-ui" else 3)]  # hello, start, plan
    assert frames[2].id == "2"

    with psycopg.Connection.connect(dsn) as conn, conn.transaction():
        conn.execute(f"DELETE FROM {postgres.TABLE} WHERE session_id = 'agent-1'")
        conn.execute(
            f"INSERT INTO {postgres.TABLE} (session_id, seq, type, data) "
            "VALUES ('agent-1', 0, 'todo/write', %s)",
            (json.dumps({"todos": [todo("New")]}),),
        )
        conn.execute("SELECT pg_notify(%s, %s)", (postgres.CHANNEL, "0:agent-1"))
    fresh = stream.next()
    while not fresh.data:  # keep-alives
        fresh = stream.next()
    assert fresh.id == "0"
    assert fresh.json()["content" if form == "ag-ui" else "data"] == {"todos": [todo("New")]}

    postgres.delete_session(dsn, "agent-1")
    end = stream.next()
    while not end.data or end.json()["type"] not in ("RUN_ERROR", "error"):
        end = stream.next()
    message = "session 'agent-1': its log was deleted"
    assert end.json() == (
        {"type": "RUN_ERROR", "message": message, "code": "session_deleted"}
        if form == "ag-ui"
        else {"type": "error", "errorText": message}
    )


def test_the_tree_api_over_postgresql_parents_signals_and_family(dsn: str) -> None:
    record(dsn, "lead", ("turn/start", {}), (EVENT_TYPE, {"todos": [todo("plan")]}))
    with postgres.PostgresSession(dsn, "worker", parent="lead") as session:
        session.append("turn/start", {})
        session.append(EVENT_TYPE, {"todos": [todo("A"), todo("B")]})
        session.append(EVENT_TYPE, {"todos": [todo("A", "in_progress")]})
    with postgres.PostgresSession(dsn, "stray", parent="gone") as session:
        session.append(EVENT_TYPE, {"todos": [todo("x")]})

    async def calls(client: httpx.AsyncClient) -> list[Any]:
        for _ in range(100):  # a loaded machine may answer the first list before its signals
            listing = (await client.get("/api/sessions")).json()
            if not any(row["signalsPending"] for row in listing["sessions"]):
                break
            await asyncio.sleep(0.05)
        family = [(await client.get(f"/api/sessions/{n}/family")).json() for n in ("lead", "stray")]
        return [listing, *family, await client.get("/api/sessions/nobody/family")]

    listing, lead, stray, nobody = run_requests(create_app(dsn), calls)
    assert nobody.status_code == 404
    assert nobody.json() == {"error": "no session 'nobody' is served"}
    rows = {row["name"]: row for row in listing["sessions"]}
    assert rows["worker"]["parent"] == "lead"
    assert rows["worker"]["signals"] == [{"kind": "dropped", "seq": 3, "items": ["B"], "count": 1}]
    assert rows["lead"]["signals"] == []
    assert listing["unlistedParents"] == {"gone": False}
    assert lead["children"] == ["worker"]
    assert lead["parent"] is None
    assert stray["parent"] == "gone"
    assert stray["parentVisible"] is False


@pytest.fixture
def append_rows(dsn: str) -> Append:
    def append(name: str, events: Events) -> None:
        record(dsn, name, *events)

    return append


def test_a_row_whose_signals_are_not_read_yet_gives_an_empty_list_marked_pending(
    dsn: str, append_rows: Append
) -> None:
    check_signals_not_read_yet_are_pending(dsn, append_rows)


def test_signals_are_read_again_only_after_a_plan_event(dsn: str, append_rows: Append) -> None:
    check_signals_are_read_again_only_after_a_plan_event(dsn, append_rows)


@pytest.mark.parametrize("refresh", [3600.0, 0.0], ids=["seen-pending", "taken-since"])
def test_a_turn_ended_without_honouring_a_request_shows_it_in_the_list(
    dsn: str, append_rows: Append, refresh: float
) -> None:
    check_a_turn_ended_without_honouring_a_request_shows_it(dsn, append_rows, refresh=refresh)


def test_a_stuck_run_older_than_the_writes_read_says_at_least(
    dsn: str, append_rows: Append, monkeypatch: pytest.MonkeyPatch
) -> None:
    check_a_stuck_run_older_than_the_window_says_at_least(dsn, append_rows, monkeypatch)


def test_a_row_says_how_its_delegated_run_ended(dsn: str, append_rows: Append) -> None:
    check_a_row_carries_how_its_run_ended(dsn, append_rows)


def test_a_stream_whose_client_left_mid_backlog_stops_at_its_next_frame(dsn: str) -> None:
    """The follower reads a backlog in batches of rows; a gone client's stream once sent
    the rest of its batch after the client left."""
    with psycopg.Connection.connect(dsn, autocommit=True) as conn:
        conn.execute(
            f"INSERT INTO {postgres.TABLE} (session_id, seq, type, data) "
            "SELECT 's', n, 'todo/write', "
            """('{"todos": [{"content": "step ' || n || '", "status": "pending"}]}')::json """
            "FROM generate_series(0, 1999) AS n"
        )
    reader = Spied(open_reader(dsn))
    app = create_app(reader)
    path = "/api/sessions/s/stream"
    left = asyncio.run(leave_after_first_frame(app, reader, path, {"last-event-id": "0"}))
    assert left.frames_after <= 1, f"{left.frames_after} frames sent after the client left"
    assert reader.followed - left.followed_at_leaving <= 2, reader.followed
    assert reader.closed == 1
