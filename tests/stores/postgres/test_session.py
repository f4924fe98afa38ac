"""The PostgreSQL store: the shared contract, then what only this store has.

Each test works in a database of its own (see conftest.py), so notifications
and rows never cross between tests.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Iterator

import psycopg
import pytest
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from dsh_tool_todo.core.contract import EVENT_TYPE
from dsh_tool_todo.errors import InvalidLog, LinkConflict, UsageError
from dsh_tool_todo.stores import postgres
from dsh_tool_todo.stores.postgres import (
    AsyncPostgresSession,
    PostgresSession,
    WriterConflict,
    _sql,
)
from tests.stores.conftest import select_only_role
from tests.stores.contract import PLAN, DurableContract, Event, Opener, new_host

SESSION = "agent-1"


def insert_row(dsn: str, session_id: str, seq: int, kind: str, text: str) -> None:
    with psycopg.Connection.connect(dsn, autocommit=True) as conn:
        conn.execute(
            f"INSERT INTO {postgres.TABLE} (session_id, seq, type, data) VALUES (%s, %s, %s, %s)",
            (session_id, seq, kind, text),
        )


class TestPostgresSession(DurableContract):
    refused_at_open = False  # no claim is held between appends: the taken seq refuses

    @pytest.fixture
    def source(self, pg_dsn: str) -> object:
        return pg_dsn

    @pytest.fixture
    def open_session(self, source: str) -> Opener:
        return lambda: PostgresSession(source, SESSION)

    @pytest.fixture
    def read_log(self, pg_dsn: str) -> Callable[[], list[Event]]:
        return lambda: postgres.read_tail(pg_dsn, SESSION, limit=10_000)

    @pytest.fixture
    def write_foreign(self, pg_dsn: str) -> Callable[[int, str, str], None]:
        return lambda seq, kind, text: insert_row(pg_dsn, SESSION, seq, kind, text)

    @pytest.fixture
    def log_name(self) -> str:
        return SESSION

    def where(self, seq: int) -> str:
        return rf"session '{SESSION}', seq {seq}\b"


class TestPostgresSessionOnAPool(TestPostgresSession):
    """The same contract when the host passes a pool of its own (not autocommit)."""

    @pytest.fixture
    def source(self, pg_dsn: str) -> Iterator[ConnectionPool[psycopg.Connection[object]]]:
        with ConnectionPool(pg_dsn, min_size=1, max_size=4, open=True) as pool:
            yield pool


# --- setup and the schema -------------------------------------------------------------


def schema_versions(dsn: str) -> list[int]:
    with psycopg.Connection.connect(dsn) as conn:
        rows = conn.execute(f"SELECT version FROM {postgres.VERSION_TABLE} ORDER BY 1").fetchall()
    return [int(row[0]) for row in rows]


def test_setup_is_idempotent_on_a_string_an_autocommit_connection_and_a_pool(
    empty_pg_dsn: str,
) -> None:
    assert postgres.setup(empty_pg_dsn) == postgres.SCHEMA_VERSION
    with psycopg.Connection.connect(empty_pg_dsn, autocommit=True) as conn:
        assert postgres.setup(conn) == postgres.SCHEMA_VERSION
    with ConnectionPool(empty_pg_dsn, min_size=1, max_size=2, open=True) as pool:
        assert postgres.setup(pool) == postgres.SCHEMA_VERSION
    assert schema_versions(empty_pg_dsn) == list(range(1, postgres.SCHEMA_VERSION + 1))


def test_setup_on_a_fresh_database_from_several_threads_at_once(empty_pg_dsn: str) -> None:
    errors: list[BaseException] = []

    def run() -> None:
        try:
            postgres.setup(empty_pg_dsn)
        except BaseException as error:  # collected: a thread's failure must fail the test
            errors.append(error)

    threads = [threading.Thread(target=run) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert schema_versions(empty_pg_dsn) == list(range(1, postgres.SCHEMA_VERSION + 1))


def test_the_data_column_is_json_and_keeps_the_text_as_written(pg_dsn: str) -> None:
    with psycopg.Connection.connect(pg_dsn) as conn:
        kind = conn.execute(
            "SELECT data_type FROM information_schema.columns "
            "WHERE table_name = %s AND column_name = 'data'",
            (postgres.TABLE,),
        ).fetchone()
    assert kind == ("json",)
    with PostgresSession(pg_dsn, SESSION) as session:
        session.append("note", {"b": 1, "a": "\x00\ud800"})
    with psycopg.Connection.connect(pg_dsn) as conn:
        text = conn.execute(f"SELECT data::text FROM {postgres.TABLE}").fetchone()
    assert text == ('{"b":1,"a":"\\u0000\\ud800"}',)


def test_a_session_on_a_database_without_the_table_says_to_run_setup(
    empty_pg_dsn: str,
) -> None:
    with pytest.raises(postgres.PostgresStoreError, match=r"db init DSN.*setup\(\)"):
        PostgresSession(empty_pg_dsn, SESSION)
    with pytest.raises(postgres.PostgresStoreError, match="db init"):
        postgres.read_tail(empty_pg_dsn, SESSION)


def test_a_schema_written_by_a_newer_version_is_refused(pg_dsn: str) -> None:
    with psycopg.Connection.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f"INSERT INTO {postgres.VERSION_TABLE} (version) VALUES (99)")
    with pytest.raises(postgres.PostgresStoreError, match=r"version 99 .*newer"):
        PostgresSession(pg_dsn, SESSION)
    with pytest.raises(postgres.PostgresStoreError, match="newer"):
        postgres.setup(pg_dsn)


def test_the_current_plan_query_probes_the_partial_index(pg_dsn: str) -> None:
    with psycopg.Connection.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(
            f"INSERT INTO {postgres.TABLE} (session_id, seq, type, data) "
            "SELECT 's' || (n % 50), n / 50, CASE WHEN n % 7 = 0 THEN 'todo/write' "
            "ELSE 'note' END, '{\"todos\": []}' FROM generate_series(0, 49999) AS n"
        )
        conn.execute(f"ANALYZE {postgres.TABLE}")
        plan = conn.execute(
            b"EXPLAIN " + _sql.latest_query(postgres.RESUME_TYPES).as_bytes(conn),
            ("s3",),
        ).fetchall()
    text = "\n".join(row[0] for row in plan)
    assert f"{postgres.TABLE}_resume" in text, text
    assert "Seq Scan" not in text, text


# --- sessions -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("session_id", "problem"),
    [("", "1 to 200"), ("x" * 201, "1 to 200"), ("a\x00b", "printable"), (7, "must be a str")],
)
def test_bad_session_ids_are_refused_before_any_io(
    pg_dsn: str, session_id: object, problem: str
) -> None:
    with pytest.raises(UsageError, match=problem):
        PostgresSession(pg_dsn, session_id)  # type: ignore[arg-type]


def test_a_refused_writer_names_the_session_and_changes_nothing(pg_dsn: str) -> None:
    first = PostgresSession(pg_dsn, "shared")
    second = PostgresSession(pg_dsn, "shared")
    heard: list[int] = []
    first.subscribe(lambda event: heard.append(event["seq"]))
    second.append("note", {"by": "second"})
    with pytest.raises(WriterConflict, match=r"session 'shared': seq 0 .*another writer"):
        first.append("note", {"by": "first"})
    assert heard == []
    assert first.next_seq == 0
    assert [e["data"] for e in postgres.read_tail(pg_dsn, "shared")] == [{"by": "second"}]


def test_sessions_with_different_ids_do_not_share_seqs(pg_dsn: str) -> None:
    with PostgresSession(pg_dsn, "a") as a, PostgresSession(pg_dsn, "b") as b:
        assert [a.append("n", {})["seq"], b.append("n", {})["seq"], a.append("n", {})["seq"]] == [
            0,
            0,
            1,
        ]


def test_many_sessions_share_the_process_pool(pg_dsn: str) -> None:
    sessions = [PostgresSession(pg_dsn, f"agent-{n}") for n in range(200)]
    for session in sessions:
        session.append("turn/start", {})
    with psycopg.Connection.connect(pg_dsn) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
        ).fetchone()
    assert row is not None
    assert row[0] <= postgres.DEFAULT_POOL_SIZE + 1  # the pool, and this connection


def test_read_tail_pages_backwards_in_log_order(pg_dsn: str) -> None:
    with PostgresSession(pg_dsn, SESSION) as session:
        for n in range(10):
            session.append("note", {"n": n})
    assert [e["seq"] for e in postgres.read_tail(pg_dsn, SESSION, limit=3)] == [7, 8, 9]
    page = postgres.read_tail(pg_dsn, SESSION, before_seq=7, limit=3)
    assert [e["seq"] for e in page] == [4, 5, 6]
    assert postgres.read_tail(pg_dsn, SESSION, before_seq=0) == []
    assert postgres.read_tail(pg_dsn, "nobody") == []
    with pytest.raises(UsageError, match="limit"):
        postgres.read_tail(pg_dsn, SESSION, limit=0)
    with pytest.raises(UsageError, match="before_seq"):
        postgres.read_tail(pg_dsn, SESSION, before_seq=-1)


def test_list_latest_current_plan_and_delete(pg_dsn: str) -> None:
    with PostgresSession(pg_dsn, "a") as a, PostgresSession(pg_dsn, "b") as b:
        a.append(EVENT_TYPE, {"todos": PLAN})
        a.append("note", {})
        b.append("turn/start", {})
    listed = postgres.list_sessions(pg_dsn)
    assert [(info.session_id, info.events) for info in listed] == [("b", 1), ("a", 2)]
    assert listed[0].last_activity >= listed[1].last_activity
    assert postgres.current_plan(pg_dsn, "a") == PLAN
    assert postgres.current_plan(pg_dsn, "b") is None
    assert postgres.latest_event(pg_dsn, "a", ["note"]) == {"seq": 1, "type": "note", "data": {}}
    assert postgres.latest_event(pg_dsn, "a", []) is None
    assert postgres.delete_session(pg_dsn, "a") == 2
    assert [info.session_id for info in postgres.list_sessions(pg_dsn)] == ["b"]


def test_the_readers_name_session_and_seq_of_a_hostile_row(pg_dsn: str) -> None:
    insert_row(pg_dsn, "x", 0, EVENT_TYPE, '{"todos": [{"content": "", "status": "pending"}]}')
    with pytest.raises(InvalidLog, match=r"session 'x', seq 0: .*content"):
        postgres.current_plan(pg_dsn, "x")
    with pytest.raises(InvalidLog, match=r"session 'x', seq 0"):
        PostgresSession(pg_dsn, "x").latest(postgres.RESUME_TYPES)


# --- the async session ----------------------------------------------------------------


def test_the_async_session_appends_resumes_and_refuses_a_stale_writer(pg_dsn: str) -> None:
    async def main() -> None:
        async with AsyncConnectionPool(pg_dsn, min_size=1, max_size=2, open=False) as pool:
            async with AsyncPostgresSession(pool, SESSION) as session:
                host = new_host()
                agent = host.new_agent(session=session)
                text = await host.acall_tool("todo_write", {"todos": PLAN}, agent=agent)
                assert text.startswith("Updated todo list")
                assert (await session.append("note", {}))["seq"] == 1
                with pytest.raises(UsageError, match="alatest"):
                    session.latest(["note"])
                assert await session.alatest(["note"]) == {"seq": 1, "type": "note", "data": {}}
            async with AsyncPostgresSession(pool, SESSION) as again:
                host = new_host()
                host.new_agent(session=again)
                assert host.projection(again, "todos") == PLAN
                stale = await AsyncPostgresSession(pool, SESSION).open()
                await again.append("turn/start", {})
                for _ in range(2):
                    with pytest.raises(WriterConflict, match=f"session '{SESSION}': seq 2"):
                        await stale.append("note", {})
            assert await postgres.acurrent_plan(pool, SESSION) is None
            tail = await postgres.aread_tail(pool, SESSION, limit=2)
            assert [event["seq"] for event in tail] == [1, 2]
            listed = await postgres.alist_sessions(pool)
            assert [(info.session_id, info.events) for info in listed] == [(SESSION, 3)]

    asyncio.run(main())


def test_an_async_session_on_a_conninfo_string_shares_a_pool_per_loop(pg_dsn: str) -> None:
    async def main() -> None:
        sessions = [AsyncPostgresSession(pg_dsn, f"a{n}") for n in range(3)]
        for session in sessions:
            await session.append("note", {})
        assert len({id(await s._pool()) for s in sessions}) == 1
        await postgres.close_async_shared_pools()

    asyncio.run(main())


def test_an_unopened_async_session_refuses_a_sync_latest(pg_dsn: str) -> None:
    with pytest.raises(UsageError, match="open it first"):
        AsyncPostgresSession(pg_dsn, SESSION).latest(postgres.RESUME_TYPES)


# --- the follower ---------------------------------------------------------------------


async def take(follower: postgres.PostgresFollower, count: int) -> list[Event]:
    """The follower's next ``count`` events; a missing one fails the test within 10 s."""

    async def collect() -> list[Event]:
        events: list[Event] = []
        async for event in follower:
            events.append(event)
            if len(events) == count:
                break
        return events

    return await asyncio.wait_for(collect(), 10)


async def listening_connections(dsn: str) -> int:
    async with await psycopg.AsyncConnection.connect(dsn) as conn:
        cursor = await conn.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND query LIKE 'LISTEN%'"
        )
        row = await cursor.fetchone()
    assert row is not None
    return int(row[0])


def test_a_follower_yields_the_backlog_then_live_events_in_order(pg_dsn: str) -> None:
    writer = PostgresSession(pg_dsn, SESSION)
    for n in range(3):
        writer.append("note", {"n": n})

    async def main() -> None:
        async with postgres.PostgresFollower(pg_dsn, SESSION) as follower:
            assert [e["seq"] for e in await take(follower, 3)] == [0, 1, 2]
            live = asyncio.create_task(take(follower, 20))
            for n in range(3, 23):
                await asyncio.to_thread(writer.append, "note", {"n": n})
            events = await live
            assert [e["seq"] for e in events] == list(range(3, 23))
            assert events[0] == {"seq": 3, "type": "note", "data": {"n": 3}}
            assert follower.last_seq == 22

    asyncio.run(main())


def test_followers_of_one_process_share_one_listen_connection(pg_dsn: str) -> None:
    writer_a = PostgresSession(pg_dsn, "a")
    writer_b = PostgresSession(pg_dsn, "b")

    async def main() -> None:
        async with (
            postgres.PostgresFollower(pg_dsn, "a") as a,
            postgres.PostgresFollower(pg_dsn, "b") as b,
            postgres.PostgresFollower(pg_dsn, "a", after_seq=0) as a_late,
        ):
            assert await listening_connections(pg_dsn) == 1
            await asyncio.to_thread(writer_a.append, "note", {"n": 0})
            await asyncio.to_thread(writer_b.append, "note", {"n": 0})
            await asyncio.to_thread(writer_a.append, "note", {"n": 1})
            assert [e["seq"] for e in await take(a, 2)] == [0, 1]
            assert [e["seq"] for e in await take(b, 1)] == [0]
            assert [e["seq"] for e in await take(a_late, 1)] == [1]
        assert await listening_connections(pg_dsn) == 0  # closed with the last follower

    asyncio.run(main())


def test_a_follower_only_reads_it_works_for_a_role_that_cannot_write(pg_dsn: str) -> None:
    writer = PostgresSession(pg_dsn, SESSION)
    writer.append("note", {})
    with select_only_role(pg_dsn) as viewer:

        async def main() -> None:
            async with postgres.PostgresFollower(viewer, SESSION) as follower:
                assert [e["seq"] for e in await take(follower, 1)] == [0]
                await asyncio.to_thread(writer.append, "note", {})
                assert [e["seq"] for e in await take(follower, 1)] == [1]

        asyncio.run(main())


def test_a_follower_refuses_a_hostile_row_naming_session_and_seq(pg_dsn: str) -> None:
    insert_row(pg_dsn, SESSION, 0, "note", "{}")
    insert_row(pg_dsn, SESSION, 1, EVENT_TYPE, '{"todos": "all of them"}')

    async def main() -> None:
        async with postgres.PostgresFollower(pg_dsn, SESSION) as follower:
            assert await take(follower, 1) == [{"seq": 0, "type": "note", "data": {}}]
            for _ in range(2):  # and it stays there
                with pytest.raises(InvalidLog, match=f"session '{SESSION}', seq 1: "):
                    await take(follower, 1)
            assert follower.last_seq == 0

    asyncio.run(main())


def test_a_follower_names_a_missing_table_instead_of_waiting(empty_pg_dsn: str) -> None:
    async def main() -> None:
        async with postgres.PostgresFollower(empty_pg_dsn, SESSION) as follower:
            with pytest.raises(postgres.PostgresStoreError, match="db init"):
                await take(follower, 1)

    asyncio.run(main())


def test_a_follower_on_an_unreachable_server_fails_at_once() -> None:
    async def main() -> None:
        follower = postgres.PostgresFollower("postgresql://postgres@127.0.0.1:1/x", SESSION)
        with pytest.raises(postgres.PostgresUnavailable, match=r"127\.0\.0\.1:1\b"):
            await follower.__anext__()
        await follower.aclose()

    asyncio.run(main())


def test_a_session_id_with_colons_and_any_script_is_followed_and_listed(pg_dsn: str) -> None:
    name = "team:α/agent 7:ü"
    writer = PostgresSession(pg_dsn, name)
    decoy = PostgresSession(pg_dsn, "team")  # a prefix of the name before its first colon

    async def main() -> None:
        async with postgres.PostgresFollower(pg_dsn, name) as follower:
            await asyncio.to_thread(decoy.append, "note", {})
            await asyncio.to_thread(writer.append, "note", {"n": 0})
            assert await take(follower, 1) == [{"seq": 0, "type": "note", "data": {"n": 0}}]

    asyncio.run(main())
    assert {info.session_id for info in postgres.list_sessions(pg_dsn)} == {name, "team"}


def test_the_async_sessions_sync_latest_knows_each_resume_type(pg_dsn: str) -> None:
    insert_row(pg_dsn, SESSION, 0, EVENT_TYPE, '{"todos": [{"content": "", "status": "x"}]}')
    insert_row(pg_dsn, SESSION, 1, EVENT_TYPE, json.dumps({"todos": PLAN}))
    insert_row(pg_dsn, SESSION, 2, "turn/start", "{}")

    async def main() -> None:
        async with AsyncPostgresSession(pg_dsn, SESSION) as session:
            assert session.latest([EVENT_TYPE]) == {
                "seq": 1,
                "type": EVENT_TYPE,
                "data": {"todos": PLAN},
            }
            assert session.latest(postgres.RESUME_TYPES) == {
                "seq": 2,
                "type": "turn/start",
                "data": {},
            }
            host = new_host()
            host.new_agent(session=session)
            assert host.projection(session, "todos") is None
            await session.append(EVENT_TYPE, {"todos": PLAN[:1]})
            await session.append("turn/start", {"n": 2})
            assert session.latest([EVENT_TYPE]) == {
                "seq": 3,
                "type": EVENT_TYPE,
                "data": {"todos": PLAN[:1]},
            }
            newest = session.latest(["turn/start", EVENT_TYPE])
            assert newest is not None
            assert newest["seq"] == 4
        insert_row(pg_dsn, SESSION, 5, EVENT_TYPE, '{"todos": "broken"}')
        async with AsyncPostgresSession(pg_dsn, SESSION) as again:
            start = {"seq": 4, "type": "turn/start", "data": {"n": 2}}
            assert again.latest(["turn/start"]) == start
            with pytest.raises(InvalidLog, match=f"session '{SESSION}', seq 5"):
                again.latest(postgres.RESUME_TYPES)
        await postgres.close_async_shared_pools()

    asyncio.run(main())


def test_an_async_session_records_its_link_when_it_opens_and_checks_it_on_reopen(
    pg_dsn: str,
) -> None:
    async def scenario() -> None:
        child = AsyncPostgresSession(pg_dsn, "child", parent="lead", parent_call_id="c1")
        assert child.key == "child"
        async with child:
            await child.append(EVENT_TYPE, {"todos": []})
        async with AsyncPostgresSession(pg_dsn, "child", parent="lead") as again:
            assert await again.link("lead") is None
            assert again.next_seq == 2
        with pytest.raises(LinkConflict, match="started for parent 'lead', not 'other'"):
            await AsyncPostgresSession(pg_dsn, "child", parent="other").open()
        async with AsyncPostgresSession(pg_dsn, "plain") as plain:
            assert (await plain.link("lead"))["seq"] == 0  # type: ignore[index]
            with pytest.raises(LinkConflict, match="not 'x'"):
                await plain.link("x")
        with pytest.raises(UsageError, match="pass parent= too"):
            AsyncPostgresSession(pg_dsn, "c", parent_call_id="c1")
        await postgres.close_async_shared_pools()

    asyncio.run(scenario())
    events = postgres.read_tail(pg_dsn, "child")
    assert [event["type"] for event in events] == ["session/link", EVENT_TYPE]
    assert events[0]["data"] == {"parent": "lead", "parentCallId": "c1"}


def test_two_writers_starting_one_session_under_two_parents_record_one_link(
    pg_dsn: str,
) -> None:
    async def scenario() -> None:
        first = await AsyncPostgresSession(pg_dsn, "race").open()
        second = await AsyncPostgresSession(pg_dsn, "race").open()  # both read an empty log
        await first.link("lead")
        with pytest.raises(WriterConflict, match="seq 0"):
            await second.link("rival")
        await postgres.close_async_shared_pools()

    asyncio.run(scenario())
    assert [event["data"] for event in postgres.read_tail(pg_dsn, "race")] == [{"parent": "lead"}]


# --- idempotent appends across writers (issue 23) -------------------------------------

CALL_PLAN = [{"content": "Plan", "status": "pending"}]


def call_write(call: str) -> dict[str, object]:
    return {"todos": CALL_PLAN, "callId": call}


def test_the_database_itself_refuses_the_same_call_twice_in_a_turn(pg_dsn: str) -> None:
    with PostgresSession(pg_dsn, SESSION) as session:
        session.append("turn/start", {})
        session.append(EVENT_TYPE, call_write("call_1"))
    params = {
        "sid": SESSION,
        "seq": 2,
        "type": EVENT_TYPE,
        "data": json.dumps(call_write("call_1")),
        "turn": 0,
        "call": postgres._core.call_key(call_write("call_1")),
    }
    insert = _sql.INSERT_CALL.split(" ON CONFLICT")[0]
    with psycopg.Connection.connect(pg_dsn, autocommit=True) as conn:
        with pytest.raises(psycopg.errors.UniqueViolation, match=f"{postgres.TABLE}_call"):
            conn.execute(insert, params)
        params["turn"] = 5  # another turn: allowed
        conn.execute(insert, params)
        other = {"todos": [{"content": "Other", "status": "pending"}], "callId": "call_1"}
        params.update(seq=3, turn=0, data=json.dumps(other), call=postgres._core.call_key(other))
        conn.execute(insert, params)  # the same id with another list: a new call


def test_a_writer_waits_for_another_s_uncommitted_call_and_answers_with_it(
    pg_dsn: str,
) -> None:
    with PostgresSession(pg_dsn, SESSION) as session:
        session.append("turn/start", {})
    late = PostgresSession(pg_dsn, SESSION)  # opened before the other's row: it wants seq 1
    answers: list[Event] = []
    with psycopg.Connection.connect(pg_dsn) as other:  # a transaction left open
        other.execute(
            _sql.INSERT_CALL,
            {
                "sid": SESSION,
                "seq": 1,
                "type": EVENT_TYPE,
                "data": postgres._core.encode_data(call_write("call_1")),
                "turn": 0,
                "call": postgres._core.call_key(call_write("call_1")),
            },
        )
        worker = threading.Thread(
            target=lambda: answers.append(late.append(EVENT_TYPE, call_write("call_1")))
        )
        worker.start()
        worker.join(0.5)
        assert worker.is_alive()  # held by the index entry, not answered from a read
        other.commit()
    worker.join(10)
    assert answers == [{"seq": 1, "type": EVENT_TYPE, "data": call_write("call_1")}]
    assert late.append("note", {})["seq"] == 2
    assert [event["seq"] for event in postgres.read_tail(pg_dsn, SESSION)] == [0, 1, 2]


def test_two_writers_racing_the_same_call_ids_record_each_once(pg_dsn: str) -> None:
    rounds = 30
    with PostgresSession(pg_dsn, SESSION) as session:
        session.append("turn/start", {})
    barrier = threading.Barrier(2)
    answers: dict[int, list[int]] = {0: [], 1: []}
    errors: list[BaseException] = []

    def writer(me: int) -> None:
        # a pool of its own: two writers, two sets of connections, as two processes have
        with ConnectionPool(pg_dsn, min_size=1, max_size=1, open=True) as pool:
            session = PostgresSession(pool, SESSION)
            try:
                for n in range(rounds):
                    barrier.wait(10)
                    answers[me].append(session.append(EVENT_TYPE, call_write(f"c{n}"))["seq"])
            except BaseException as error:  # collected: a thread's failure must fail the test
                errors.append(error)
                barrier.abort()

    threads = [threading.Thread(target=writer, args=(me,)) for me in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert answers[0] == answers[1] == list(range(1, rounds + 1))
    log = postgres.read_tail(pg_dsn, SESSION, limit=1000)
    assert [event["data"].get("callId") for event in log[1:]] == [f"c{n}" for n in range(rounds)]
    assert [event["seq"] for event in log] == list(range(rounds + 1))


def race_two_writers(pg_dsn: str, sid: str) -> tuple[dict[int, Event], dict[int, BaseException]]:
    """Two writers, connections of their own, append "c0" with their own plans at once."""
    barrier = threading.Barrier(2)
    answers: dict[int, Event] = {}
    errors: dict[int, BaseException] = {}

    def writer(me: int) -> None:
        with ConnectionPool(pg_dsn, min_size=1, max_size=1, open=True) as pool:
            session = PostgresSession(pool, sid)
            data = {"todos": [{"content": f"writer {me}", "status": "pending"}], "callId": "c0"}
            barrier.wait(10)
            try:
                answers[me] = session.append(EVENT_TYPE, data)
            except BaseException as error:  # collected: judged by the caller
                errors[me] = error

    threads = [threading.Thread(target=writer, args=(me,)) for me in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return answers, errors


def test_two_writers_racing_one_call_id_with_different_lists_never_answer_the_other_s_plan(
    pg_dsn: str,
) -> None:
    # Providers numbering ids per response: two writers send "c0" at once, each its own plan.
    # One session has one writer: the loser of the seq is told so (WriterConflict), never
    # answered with the winner's event (its plan acknowledged, not recorded) nor refused as a
    # UsageError; a third writer then records "c0" with its own plan too.
    for race in range(8):
        sid = f"race-{race}"
        with PostgresSession(pg_dsn, sid) as session:
            session.append("turn/start", {})
        answers, errors = race_two_writers(pg_dsn, sid)
        assert len(answers) == 1, (answers, errors)
        [(winner, event)] = answers.items()
        [error] = errors.values()
        assert isinstance(error, WriterConflict), error
        assert event["seq"] == 1
        assert event["data"]["todos"][0]["content"] == f"writer {winner}"
        with PostgresSession(pg_dsn, sid) as session:
            third = {"todos": [{"content": "writer 2", "status": "pending"}], "callId": "c0"}
            assert session.append(EVENT_TYPE, third)["seq"] == 2
            assert session.append(EVENT_TYPE, event["data"]) == event  # a retry: the first
        log = postgres.read_tail(pg_dsn, sid)
        assert [e["data"].get("todos", [{}])[0].get("content") for e in log] == [
            None,
            f"writer {winner}",
            "writer 2",
        ]


def test_a_schema_1_database_is_upgraded_and_a_read_only_role_still_follows(
    empty_pg_dsn: str,
) -> None:
    with psycopg.Connection.connect(empty_pg_dsn, autocommit=True) as conn:
        conn.execute(_sql.VERSION_DDL)
        for statement in _sql.MIGRATIONS[0].split(";"):
            conn.execute(statement.encode())
        conn.execute(_sql.RECORD_VERSION, (1,))
    insert_row(empty_pg_dsn, SESSION, 0, "turn/start", "{}")
    insert_row(empty_pg_dsn, SESSION, 1, EVENT_TYPE, json.dumps({"todos": CALL_PLAN}))
    with select_only_role(empty_pg_dsn) as viewer:
        with pytest.raises(
            postgres.PostgresStoreError, match=r"version 1 is older than 3.*db init"
        ):
            PostgresSession(empty_pg_dsn, SESSION)

        async def main() -> None:
            async with postgres.PostgresFollower(viewer, SESSION) as follower:
                assert [e["seq"] for e in await take(follower, 2)] == [0, 1]
                assert await asyncio.to_thread(postgres.setup, empty_pg_dsn) == 4
                writer = PostgresSession(empty_pg_dsn, SESSION)
                first = await asyncio.to_thread(writer.append, EVENT_TYPE, call_write("c1"))
                again = await asyncio.to_thread(writer.append, EVENT_TYPE, call_write("c1"))
                assert first == again
                await asyncio.to_thread(writer.append, "note", {})
                assert [e["seq"] for e in await take(follower, 2)] == [2, 3]
            assert postgres.current_plan(viewer, SESSION) == CALL_PLAN

        asyncio.run(main())


def test_the_async_session_records_a_repeated_call_id_once_after_reopening(pg_dsn: str) -> None:
    async def main() -> None:
        async with AsyncPostgresSession(pg_dsn, SESSION) as session:
            await session.append("turn/start", {})
            first = await session.append(EVENT_TYPE, call_write("call_1"))
            assert await session.append(EVENT_TYPE, call_write("call_1")) == first
        async with AsyncPostgresSession(pg_dsn, SESSION) as session:
            heard: list[int] = []
            session.subscribe(lambda event: heard.append(event["seq"]))
            assert await session.append(EVENT_TYPE, call_write("call_1")) == first
            assert session.latest([EVENT_TYPE]) == first
            await session.append("turn/start", {})
            assert (await session.append(EVENT_TYPE, call_write("call_1")))["seq"] == 3
            assert heard == [2, 3]
        await postgres.close_async_shared_pools()

    asyncio.run(main())


def test_a_schema_2_database_is_upgraded_to_call_ids_by_setup(empty_pg_dsn: str) -> None:
    # Version 2 (the session summaries) without version 3's call-id columns and index.
    with psycopg.Connection.connect(empty_pg_dsn, autocommit=True) as conn:
        conn.execute(_sql.VERSION_DDL)
        for version, statements in enumerate(_sql.MIGRATIONS_BY_STATEMENT[:2], 1):
            for statement in statements:
                conn.execute(statement.encode())
            conn.execute(_sql.RECORD_VERSION, (version,))
    insert_row(empty_pg_dsn, SESSION, 0, "turn/start", "{}")
    insert_row(empty_pg_dsn, SESSION, 1, EVENT_TYPE, json.dumps({"todos": CALL_PLAN}))
    with pytest.raises(postgres.PostgresStoreError, match=r"version 2 is older than 3.*db init"):
        PostgresSession(empty_pg_dsn, SESSION)
    assert schema_versions(empty_pg_dsn) == [1, 2]
    assert postgres.setup(empty_pg_dsn) == postgres.SCHEMA_VERSION == 4
    assert schema_versions(empty_pg_dsn) == [1, 2, 3, 4]
    try:
        with PostgresSession(empty_pg_dsn, SESSION) as writer:
            first = writer.append(EVENT_TYPE, call_write("c1"))
            assert (
                writer.append(EVENT_TYPE, call_write("c1"))
                == first
                == {
                    "seq": 2,
                    "type": EVENT_TYPE,
                    "data": call_write("c1"),
                }
            )
        assert [e["seq"] for e in postgres.read_tail(empty_pg_dsn, SESSION)] == [0, 1, 2]
        assert postgres.current_plan(empty_pg_dsn, SESSION) == CALL_PLAN
    finally:
        postgres.close_shared_pools()
