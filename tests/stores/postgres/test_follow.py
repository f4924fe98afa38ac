"""A hostile pass over following: followers that fail to join, followers closed by another task
while their iteration waits, and many followers' reads batched into one query."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest

from dsh_tool_todo.stores import postgres
from dsh_tool_todo.stores.postgres import PostgresFollower, follow
from dsh_tool_todo.stores.postgres._pools import HUBS
from tests.stores.conftest import (
    admin_connection,
    count_listening,
    database_dsn,
    select_only_role,
)
from tests.stores.postgres.test_hostile import before_query, insert_row, notify
from tests.stores.postgres.test_notify import take


def others() -> list[str]:
    """The tasks of this loop other than the caller: what a closed follower must not leave."""
    here = asyncio.current_task()
    return sorted(t.get_coro().__qualname__ for t in asyncio.all_tasks() if t is not here)  # type: ignore[union-attr]


def test_a_follower_that_cannot_reach_the_server_leaves_no_task_running() -> None:
    down = "postgresql://postgres@127.0.0.1:1/none"

    async def main() -> list[str]:
        follower = PostgresFollower(down, "agent-1", reconnect_delay=0.05)
        with pytest.raises(postgres.PostgresUnavailable):
            await follower.__anext__()
        await follower.aclose()
        await asyncio.sleep(0.2)
        return others()

    assert asyncio.run(main()) == []


def test_a_follower_cancelled_while_it_joins_leaves_no_connection_or_task(pg_dsn: str) -> None:
    async def main() -> tuple[list[str], int]:
        follower = PostgresFollower(pg_dsn, "agent-1")
        joining = asyncio.ensure_future(follower.__aenter__())
        await asyncio.sleep(0)  # the hub's LISTEN task has started connecting
        joining.cancel()
        with pytest.raises(asyncio.CancelledError):
            await joining
        await follower.aclose()
        await asyncio.sleep(0.5)  # time for a leaked LISTEN to connect
        return others(), await asyncio.to_thread(count_listening, pg_dsn)

    assert asyncio.run(main()) == ([], 0)


@pytest.mark.parametrize("alone", [True, False], ids=["last-follower", "hub-shared"])
def test_a_follower_closed_by_another_task_ends_the_iteration_waiting_on_it(
    pg_dsn: str, alone: bool
) -> None:
    insert_row(pg_dsn, "watched", 0)

    async def main() -> tuple[list[int], list[str]]:
        other = PostgresFollower(pg_dsn, "other")
        if not alone:
            await other.__aenter__()
        follower = PostgresFollower(pg_dsn, "watched")
        seen: list[int] = []

        async def iterate() -> None:
            async for event in follower:
                seen.append(event["seq"])

        iterating = asyncio.ensure_future(iterate())
        await asyncio.sleep(0.5)  # it yielded seq 0 and waits for more
        await follower.aclose()
        await asyncio.wait_for(iterating, 5)  # ends as `async for` does: no error, no hang
        await other.aclose()
        await asyncio.sleep(0.1)
        assert HUBS.here() == {}
        return seen, others()

    assert asyncio.run(main()) == ([0], [])


def test_a_follower_closed_while_its_first_iteration_joins_leaves_nothing(pg_dsn: str) -> None:
    async def main() -> tuple[list[str], int]:
        follower = PostgresFollower(pg_dsn, "watched")
        reading = asyncio.ensure_future(follower.__anext__())
        await asyncio.sleep(0)  # joining: the hub's LISTEN is connecting
        await follower.aclose()
        with pytest.raises(StopAsyncIteration):
            await asyncio.wait_for(reading, 5)
        await asyncio.sleep(0.5)
        assert HUBS.here() == {}
        return others(), await asyncio.to_thread(count_listening, pg_dsn)

    assert asyncio.run(main()) == ([], 0)


@pytest.mark.parametrize("alone", [True, False], ids=["last-follower", "hub-shared"])
def test_a_follower_closed_while_its_read_is_in_flight_ends_and_does_not_join_again(
    pg_dsn: str, monkeypatch: pytest.MonkeyPatch, alone: bool
) -> None:
    async def broken(params: tuple[Any, ...]) -> None:
        if "watched" in params[0]:
            await asyncio.sleep(0.3)  # the read is in flight when the follower is closed
            raise psycopg.OperationalError("server closed the connection unexpectedly")

    before_query(monkeypatch, postgres._sql.READ_AFTER_EACH, broken)

    async def main() -> list[str]:
        other = PostgresFollower(pg_dsn, "other")
        if not alone:
            await other.__aenter__()
        follower = PostgresFollower(pg_dsn, "watched", reconnect_delay=0.05)
        await follower.__aenter__()
        reading = asyncio.ensure_future(follower.__anext__())
        await asyncio.sleep(0.1)
        await follower.aclose()
        with pytest.raises(StopAsyncIteration):
            await asyncio.wait_for(reading, 5)
        await other.aclose()
        await asyncio.sleep(0.1)
        assert HUBS.here() == {}  # the closed follower did not join the hub again
        return others()

    assert asyncio.run(main()) == []


def test_many_followers_with_a_backlog_catch_up_under_the_roles_statement_timeout(
    pg_dsn: str,
) -> None:
    """Read alone, each follower's backlog is a few ms of work; read together in one query
    it was many times that, over the role's statement timeout: every retry was the same
    batch, timed out again, and no follower ever got an event."""
    sessions, backlog = 100, 500
    with psycopg.Connection.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(
            f"INSERT INTO {postgres.TABLE} (session_id, seq, type, data) "
            "SELECT 'busy-' || n, seq, 'note', json_build_object('text', repeat('x', 1000)) "
            "FROM generate_series(1, %s) AS n, generate_series(0, %s) AS seq",
            (sessions, backlog - 1),
        )

    async def main(viewer: str) -> list[list[int]]:
        followers = [
            PostgresFollower(viewer, f"busy-{n}", reconnect_delay=0.05)
            for n in range(1, sessions + 1)
        ]
        try:
            return await asyncio.gather(*(take(f, backlog, within=30) for f in followers))
        finally:
            for follower in followers:
                await follower.aclose()

    with select_only_role(pg_dsn, statement_timeout="100ms") as viewer:
        assert asyncio.run(main(viewer)) == [list(range(backlog))] * sessions


def test_a_follower_whose_reads_of_big_events_time_out_reads_fewer_at_once(pg_dsn: str) -> None:
    """Forty events of a megabyte each: reading them all at once takes longer than the
    role's statement_timeout, reading a few does not. The follower read all at once
    again and again, never yielding anything and never saying why."""
    with psycopg.Connection.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(
            f"INSERT INTO {postgres.TABLE} (session_id, seq, type, data) "
            "SELECT 'big', seq, 'note', json_build_object('text', repeat('x', 1000000)) "
            "FROM generate_series(0, 39) AS seq"
        )

    async def main(viewer: str) -> list[int]:
        async with PostgresFollower(viewer, "big", reconnect_delay=0.05) as follower:
            return await take(follower, 40, within=20)

    with select_only_role(pg_dsn, statement_timeout="80ms") as viewer:
        assert asyncio.run(main(viewer)) == list(range(40))


def test_one_followers_batched_read_is_never_much_more_than_its_own(
    pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """However many followers read together, one query brings at most a few of a follower's
    own reads' worth of rows (memory, and the time a statement may take)."""
    sessions = 40
    with psycopg.Connection.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(
            f"INSERT INTO {postgres.TABLE} (session_id, seq, type, data) "
            "SELECT 'busy-' || n, seq, 'note', '{}' "
            "FROM generate_series(1, %s) AS n, generate_series(0, %s) AS seq",
            (sessions, postgres._sql.MAX_BATCH - 1),
        )
    query = follow.Hub._query
    rows_read: list[int] = []

    async def counted(hub: follow.Hub, statement: str, params: tuple[Any, ...]) -> list[Any]:
        rows = await query(hub, statement, params)
        if statement == postgres._sql.READ_AFTER_EACH:
            rows_read.append(len(rows))
        return rows

    monkeypatch.setattr(follow.Hub, "_query", counted)

    async def main() -> list[list[int]]:
        followers = [PostgresFollower(pg_dsn, f"busy-{n}") for n in range(1, sessions + 1)]
        try:
            return await asyncio.gather(
                *(take(f, postgres._sql.MAX_BATCH, within=30) for f in followers)
            )
        finally:
            for follower in followers:
                await follower.aclose()

    assert asyncio.run(main()) == [list(range(postgres._sql.MAX_BATCH))] * sessions
    assert max(rows_read) <= 2 * postgres._sql.MAX_BATCH, max(rows_read)


@contextmanager
def latin1_database() -> Iterator[str]:
    name = f"test_{uuid.uuid4().hex}"
    with admin_connection() as conn:
        conn.execute(
            f"CREATE DATABASE {name} ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' "
            "TEMPLATE template0"
        )
    try:
        dsn = database_dsn(name)
        postgres.setup(dsn)
        yield dsn
    finally:
        postgres.close_shared_pools()
        with admin_connection() as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def test_a_follower_the_database_cannot_encode_fails_alone_not_its_batch() -> None:
    """In a LATIN1 database a session id with a euro sign cannot be sent: that follower's
    read fails, with a store error; a follower read in the same query gets its events."""
    with latin1_database() as dsn:
        insert_row(dsn, "plain", 0)

        async def main() -> list[object]:
            async with (
                PostgresFollower(dsn, "plain") as plain,
                PostgresFollower(dsn, "caf\u20ac") as euro,
            ):
                return await asyncio.gather(take(plain, 1), take(euro, 1), return_exceptions=True)

        plain, euro = asyncio.run(main())
        assert plain == [0]
        assert isinstance(euro, postgres.PostgresStoreError), repr(euro)
        assert "LATIN1" in str(euro)


def test_a_follower_the_database_cannot_encode_does_not_stop_the_others_poll() -> None:
    with latin1_database() as dsn:

        async def main() -> list[int]:
            async with (
                PostgresFollower(dsn, "plain", poll_interval=0.2) as plain,
                PostgresFollower(dsn, "caf\u20ac") as euro,
            ):
                waiting = asyncio.ensure_future(take(plain, 1, within=5))
                with pytest.raises(postgres.PostgresStoreError):
                    await take(euro, 1)
                await asyncio.sleep(1.5)  # "plain" is no longer among the busy sessions
                await asyncio.to_thread(insert_row, dsn, "plain", 0)  # never announced
                return await waiting

        assert asyncio.run(main()) == [0]


def test_a_foreign_notification_of_the_next_seq_does_not_hide_its_unannounced_commit(
    pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A foreign NOTIFY names seq 1 before it exists; then seq 1 commits and its writer dies
    before notifying. The poll must still wake the follower: the notification was a claim,
    and the follower's read found it false."""
    insert_row(pg_dsn, "agent-1", 0)
    polls = asyncio.Event()

    async def gated(params: tuple[Any, ...]) -> None:
        await polls.wait()  # no poll runs between the claim and the commit

    before_query(monkeypatch, postgres._sql.NEWEST, gated)

    async def main() -> list[int]:
        polls.set()
        async with PostgresFollower(pg_dsn, "agent-1", poll_interval=0.2) as follower:
            assert await take(follower, 1) == [0]
            polls.clear()
            await asyncio.to_thread(notify, pg_dsn, "1:agent-1")  # a claim, not a commit
            waiting = asyncio.ensure_future(take(follower, 1, within=5))
            await asyncio.sleep(0.3)  # woken, it read: nothing after seq 0
            await asyncio.to_thread(insert_row, pg_dsn, "agent-1", 1)  # never announced
            polls.set()
            return await waiting

    assert asyncio.run(main()) == [1]


def test_a_session_recreated_with_the_same_events_is_still_a_replaced_log(pg_dsn: str) -> None:
    """The new log's rows hold the same type and data as the old one's (a session of the
    same agent, started again): the row at the follower's seq is still another row."""
    from dsh_tool_todo.errors import LogReplaced
    from dsh_tool_todo.stores.postgres import PostgresSession

    def write(count: int) -> None:
        with PostgresSession(pg_dsn, "agent-1") as session:
            for _ in range(count):
                session.append("note", {})

    async def main() -> list[int]:
        write(3)
        async with PostgresFollower(pg_dsn, "agent-1") as follower:
            seen = await take(follower, 3)
            assert postgres.delete_session(pg_dsn, "agent-1") == 3
            write(5)
            with pytest.raises(LogReplaced, match="seq 2"):
                seen += await take(follower, 1)
            return seen

    assert asyncio.run(main()) == [0, 1, 2]


def test_two_waits_on_one_follower_at_once_share_its_events_and_invent_no_replaced_log(
    pg_dsn: str,
) -> None:
    """Two ``__anext__`` under way together (a handler waiting on the follower and on a
    socket, say): both reads come back from seq 0; the second one, taken after the first
    had moved the follower on, made it say later that seq 2 was gone."""
    for seq in range(3):
        insert_row(pg_dsn, "agent-1", seq)

    async def main() -> list[int]:
        async with PostgresFollower(pg_dsn, "agent-1") as follower:
            both = await asyncio.gather(follower.__anext__(), follower.__anext__())
            seen = [event["seq"] for event in both] + await take(follower, 1)
            await asyncio.to_thread(insert_row, pg_dsn, "agent-1", 3)
            return seen + await take(follower, 1)

    assert asyncio.run(main()) == [0, 1, 2, 3]


def test_a_log_whose_first_rows_are_missing_is_invalid_as_a_gap_later_is(pg_dsn: str) -> None:
    """From the start, a follower's first event is seq 0: a log that begins at seq 2 (rows
    deleted, or written by something else) is missing events, as one with a gap later is."""
    from dsh_tool_todo.errors import InvalidLog

    insert_row(pg_dsn, "agent-1", 2)
    insert_row(pg_dsn, "agent-1", 3)

    async def main() -> None:
        async with PostgresFollower(pg_dsn, "agent-1") as follower:
            with pytest.raises(InvalidLog, match=r"'agent-1', seq 2: .*missing"):
                await take(follower, 1)

    asyncio.run(main())
