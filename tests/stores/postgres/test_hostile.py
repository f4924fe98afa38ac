"""A hostile pass over the PostgreSQL store: foreign NOTIFYs, deleted and recreated sessions,
concurrent first appends, hostile session ids in the CLI."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Awaitable, Callable
from typing import Any

import psycopg
import pytest

from dsh_tool_todo.core.contract import EVENT_TYPE
from dsh_tool_todo.core.listeners import Event
from dsh_tool_todo.errors import LogReplaced, UsageError
from dsh_tool_todo.stores import postgres
from dsh_tool_todo.stores.postgres import AsyncPostgresSession, PostgresFollower, PostgresSession
from tests.cli.test_cli import dsh_todo
from tests.stores.conftest import cut_every_other_connection
from tests.stores.postgres.test_admin import url

SESSION = "agent-7"


def notify(dsn: str, payload: str) -> None:
    with psycopg.Connection.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT pg_notify(%s, %s)", (postgres.CHANNEL, payload))


def before_query(
    monkeypatch: pytest.MonkeyPatch,
    statement: str,
    hook: Callable[[tuple[Any, ...]], Awaitable[object]],
) -> None:
    """Await ``hook(params)`` before each of the followers' hubs' ``statement`` queries is
    sent (a hook that raises is the query's error)."""
    from dsh_tool_todo.stores.postgres import follow

    query = follow.Hub._query

    async def hooked(hub: follow.Hub, sent: str, params: tuple[Any, ...]) -> list[Any]:
        if sent == statement:
            await hook(params)
        return await query(hub, sent, params)

    monkeypatch.setattr(follow.Hub, "_query", hooked)


def insert_row(dsn: str, session_id: str, seq: int, kind: str = "note", text: str = "{}") -> None:
    with psycopg.Connection.connect(dsn, autocommit=True) as conn:
        conn.execute(
            f"INSERT INTO {postgres.TABLE} (session_id, seq, type, data) VALUES (%s, %s, %s, %s)",
            (session_id, seq, kind, text),
        )


async def next_event(follower: PostgresFollower, within: float = 5.0) -> Event:
    return await asyncio.wait_for(follower.__anext__(), within)


@pytest.mark.parametrize(
    "payload", ["²:x", "①:x", "٣:agent-7", "1", ":", "99999999999999999999999:x"]
)
def test_a_foreign_notify_never_stops_the_followers_of_the_process(
    pg_dsn: str, payload: str
) -> None:
    async def main() -> list[int]:
        seen: list[int] = []
        with PostgresSession(pg_dsn, SESSION) as session:
            first = PostgresFollower(pg_dsn, SESSION, reconnect_delay=0.05)
            session.append("note", {"n": 0})
            seen.append((await next_event(first))["seq"])
            notify(pg_dsn, payload)  # any role may send one
            await asyncio.sleep(0.2)
            session.append("note", {"n": 1})
            seen.append((await next_event(first))["seq"])
            second = PostgresFollower(pg_dsn, SESSION, after_seq=1, reconnect_delay=0.05)
            session.append("note", {"n": 2})
            seen.append((await next_event(second))["seq"])
            seen.append((await next_event(first))["seq"])
            await second.aclose()
            await first.aclose()
        return seen

    assert asyncio.run(main()) == [0, 1, 2, 2]


def test_a_follower_of_a_deleted_and_recreated_session_says_the_log_was_replaced(
    pg_dsn: str,
) -> None:
    async def main() -> list[int]:
        seen: list[int] = []
        with PostgresSession(pg_dsn, SESSION) as session:
            for n in range(3):
                session.append("note", {"n": n})
        follower = PostgresFollower(pg_dsn, SESSION, reconnect_delay=0.05)
        try:
            for _ in range(3):
                seen.append((await next_event(follower))["seq"])
            assert postgres.delete_session(pg_dsn, SESSION) == 3
            with PostgresSession(pg_dsn, SESSION) as session:  # a new session of that name
                for n in range(5):
                    session.append("note", {"new": n})
            with pytest.raises(LogReplaced, match=f"session '{SESSION}': seq 2"):
                await next_event(follower)
            with pytest.raises(LogReplaced):  # and again: it never goes on silently
                await next_event(follower)
        finally:
            await follower.aclose()
        return seen

    assert asyncio.run(main()) == [0, 1, 2]


def test_a_deletion_alone_wakes_the_follower_to_say_the_log_is_gone(pg_dsn: str) -> None:
    async def main() -> None:
        with PostgresSession(pg_dsn, SESSION) as session:
            session.append("note", {})
        follower = PostgresFollower(pg_dsn, SESSION, after_seq=0, reconnect_delay=0.05)
        try:
            waiting = asyncio.ensure_future(follower.__anext__())
            await asyncio.sleep(0.3)
            assert not waiting.done()
            await asyncio.to_thread(postgres.delete_session, pg_dsn, SESSION)
            with pytest.raises(LogReplaced, match="gone"):
                await asyncio.wait_for(waiting, 5)
        finally:
            await follower.aclose()

    asyncio.run(main())


def test_concurrent_first_appends_on_an_unopened_async_session_are_all_recorded(
    pg_dsn: str,
) -> None:
    async def main() -> list[int]:
        session = AsyncPostgresSession(pg_dsn, SESSION)
        try:
            events = await asyncio.gather(*(session.append("note", {"n": n}) for n in range(4)))
            more = await session.append("note", {"n": 4})
        finally:
            session.close()
            await postgres.close_async_shared_pools()
        return [*sorted(event["seq"] for event in events), more["seq"]]

    assert asyncio.run(main()) == [0, 1, 2, 3, 4]
    assert [event["seq"] for event in postgres.read_tail(pg_dsn, SESSION)] == [0, 1, 2, 3, 4]


HOSTILE = "evil\x1b]0;owned\x07\x1b[31m\nforged\tline"


def test_sessions_prints_hostile_ids_escaped_one_line_each_and_deletes_them(
    pg_dsn: str,
) -> None:
    insert_row(pg_dsn, HOSTILE, 0)
    insert_row(pg_dsn, "plain", 0)
    listing = dsh_todo("sessions", url(pg_dsn)).stdout
    assert "\x1b" not in listing
    assert "\x07" not in listing
    lines = listing.splitlines()
    assert len(lines) == 2, lines
    assert any(line.startswith("evil\\x1b]0;owned\\x07") for line in lines), lines
    deleted = dsh_todo("sessions", url(pg_dsn), "--delete", HOSTILE)
    assert deleted.stdout.startswith("deleted session 'evil\\x1b"), deleted.stdout
    assert "\x1b" not in deleted.stdout
    assert [info.session_id for info in postgres.list_sessions(pg_dsn)] == ["plain"]


def test_deleting_a_session_that_does_not_exist_is_refused_in_one_line(pg_dsn: str) -> None:
    run = dsh_todo("sessions", url(pg_dsn), "--delete", "nobody\x1b[2J", check=False)
    assert run.returncode == 2
    assert "no session 'nobody\\x1b[2J'" in run.stderr
    assert "\x1b" not in run.stderr


def _kill_writer_mid_append(dsn: str) -> subprocess.Popen[Any]:
    code = (
        "import sys, os\n"
        "from dsh_tool_todo.stores.postgres import PostgresSession\n"
        "s = PostgresSession(sys.argv[1], 'agent-7')\n"
        "n = 0\n"
        "while True:\n"
        "    s.append('note', {'n': n, 'pad': 'x' * 2000})\n"
        "    print(n, flush=True)\n"
        "    n += 1\n"
    )
    import sys

    return subprocess.Popen(
        [sys.executable, "-c", code, dsn], stdout=subprocess.PIPE, text=True, bufsize=1
    )


def test_a_writer_killed_mid_append_loses_nothing_it_acknowledged(pg_dsn: str) -> None:
    writer = _kill_writer_mid_append(pg_dsn)
    assert writer.stdout is not None
    acknowledged = -1
    for line in writer.stdout:
        acknowledged = int(line)
        if acknowledged >= 50:
            break
    writer.kill()  # SIGKILL, somewhere inside an append
    writer.wait()
    writer.stdout.close()
    log = postgres.read_tail(pg_dsn, SESSION, limit=100_000)
    seqs = [event["seq"] for event in log]
    assert seqs == list(range(len(seqs)))  # gapless, nothing twice
    assert len(seqs) >= acknowledged + 1
    with PostgresSession(pg_dsn, SESSION) as session:  # a new writer goes on after the last row
        assert session.append("note", {})["seq"] == len(seqs)


def test_a_follower_whose_connections_are_cut_catches_up_with_nothing_missed(
    pg_dsn: str,
) -> None:
    async def main() -> list[int]:
        seen: list[int] = []
        with PostgresSession(pg_dsn, SESSION) as session:
            follower = PostgresFollower(pg_dsn, SESSION, reconnect_delay=0.05)
            try:
                session.append("note", {})
                seen.append((await next_event(follower))["seq"])
                waiting = asyncio.ensure_future(follower.__anext__())
                await asyncio.sleep(0.2)
                # at least the LISTEN and the read connection
                assert cut_every_other_connection(pg_dsn) >= 2
                for _ in range(3):
                    session.append("note", {})  # the pool replaces its dead connections
                seen.append((await asyncio.wait_for(waiting, 10))["seq"])
                seen.append((await next_event(follower, 10))["seq"])
                seen.append((await next_event(follower, 10))["seq"])
            finally:
                await follower.aclose()
        return seen

    assert asyncio.run(main()) == [0, 1, 2, 3]


def test_followers_joining_together_while_the_server_is_down_all_fail_at_once() -> None:
    down = "postgresql://postgres@127.0.0.1:1/none"

    async def main() -> list[BaseException | Event]:
        followers = [PostgresFollower(down, f"agent-{n}", reconnect_delay=0.05) for n in range(3)]
        try:
            return await asyncio.wait_for(
                asyncio.gather(*(f.__anext__() for f in followers), return_exceptions=True), 10
            )
        finally:
            for follower in followers:
                await follower.aclose()

    outcomes = asyncio.run(main())
    assert all(isinstance(outcome, postgres.PostgresUnavailable) for outcome in outcomes), outcomes
    assert all("127.0.0.1:1" in str(outcome) for outcome in outcomes)


def test_watch_starts_over_when_its_session_is_deleted_and_written_again(pg_dsn: str) -> None:
    from dsh_tool_todo.stores.postgres import admin

    with PostgresSession(pg_dsn, SESSION) as session:
        session.append(EVENT_TYPE, {"todos": [{"content": "Old", "status": "pending"}]})
        for _ in range(3):
            session.append("note", {})
    title, plans = admin.follow_plans(url(pg_dsn), SESSION)
    assert title.startswith(f"{SESSION} (PostgreSQL at 127.0.0.1:")
    assert next(plans) == [{"content": "Old", "status": "pending"}]
    new = [{"content": "New", "status": "in_progress"}]
    with psycopg.Connection.connect(pg_dsn) as conn, conn.transaction():
        conn.execute(f"DELETE FROM {postgres.TABLE} WHERE session_id = %s", (SESSION,))
        conn.execute(
            f"INSERT INTO {postgres.TABLE} (session_id, seq, type, data) VALUES (%s, 0, %s, %s)",
            (SESSION, EVENT_TYPE, postgres.encode_data({"todos": new})),
        )
        conn.execute("SELECT pg_notify(%s, %s)", (postgres.CHANNEL, f"0:{SESSION}"))
    assert next(plans) == new
    plans.close()


@pytest.mark.parametrize(
    ("parent", "call_id", "message"),
    [
        ("a\x00b", None, "parent must not hold NUL"),
        ("\ud800x", None, "parent must be valid Unicode"),
        ("p", "c\x00", "parent_call_id must not hold NUL"),
    ],
)
def test_a_link_the_summary_trigger_cannot_read_is_refused_and_nothing_is_written(
    pg_dsn: str, parent: str, call_id: str | None, message: str
) -> None:
    # before, the server refused the insert ("unsupported Unicode escape sequence"): an
    # error that named no argument
    with pytest.raises(UsageError, match=message):
        PostgresSession(pg_dsn, "child", parent=parent, parent_call_id=call_id)
    with psycopg.Connection.connect(pg_dsn) as conn:
        assert conn.execute("SELECT count(*) FROM dsh_todo_events").fetchone() == (0,)
    with PostgresSession(pg_dsn, "child", parent="<b>lead\n\x1b"):
        pass
    with psycopg.Connection.connect(pg_dsn) as conn:
        rows = conn.execute("SELECT seq, data::text FROM dsh_todo_events").fetchall()
        summary = conn.execute("SELECT parent FROM dsh_todo_sessions").fetchall()
    assert rows == [(0, '{"parent":"<b>lead\\n\\u001b"}')]
    assert summary == [("<b>lead\n\x1b",)]
