"""The reader contract, run against a PostgreSQL store."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from dsh_tool_todo.core.contract import EVENT_TYPE
from dsh_tool_todo.errors import InvalidLog, LogReplaced
from dsh_tool_todo.protocols import LogReader
from dsh_tool_todo.stores.postgres import TABLE, PostgresReader, PostgresSession, delete_session
from tests.stores.conftest import cut_every_other_connection
from tests.stores.reader_contract import (
    Deleter,
    Event,
    RawWriter,
    ReaderContract,
    Runner,
    Writer,
    next_of,
)


class TestPostgresReader(ReaderContract):
    @pytest.fixture
    def reader(self, run: Runner, pg_dsn: str) -> Iterator[LogReader]:
        reader = PostgresReader(pg_dsn)
        yield reader
        run(reader.aclose())  # on the test's own loop, where its pool was opened

    @pytest.fixture
    def open_writer(self, pg_dsn: str) -> Writer:
        return lambda name: PostgresSession(pg_dsn, name)

    @pytest.fixture
    def write_raw(self, pg_dsn: str) -> RawWriter:
        def write(name: str, event: Event) -> None:
            with psycopg.connect(pg_dsn, autocommit=True) as conn:
                conn.execute(
                    f"INSERT INTO {TABLE} (session_id, seq, type, data) VALUES (%s, %s, %s, %s)",
                    (name, event["seq"], event["type"], json.dumps(event["data"])),
                )

        return write

    @pytest.fixture
    def delete(self, pg_dsn: str) -> Deleter:
        return lambda name: delete_session(pg_dsn, name)

    @pytest.fixture
    def where(self, pg_dsn: str) -> str:
        params = conninfo_to_dict(pg_dsn)
        host, port = params.get("host") or "localhost", params.get("port") or "5432"
        return f"PostgreSQL at {host}:{port}/{params['dbname']}"

    @pytest.fixture
    def owner_names(self) -> bool:
        return False


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://viewer:hunter2-secret@db.example:6543/agents",
        "postgres://viewer@db.example:6543/agents?password=hunter2-secret",
    ],
)
def test_the_reader_names_its_database_without_the_password(url: str) -> None:
    reader = PostgresReader(url)  # nothing connects before a read

    assert reader.where == "PostgreSQL at db.example:6543/agents"


def insert(dsn: str, name: str, seq: int, kind: str, text: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            f"INSERT INTO {TABLE} (session_id, seq, type, data) VALUES (%s, %s, %s, %s)",
            (name, seq, kind, text),
        )


def test_reads_after_the_readers_connections_were_cut_succeed(pg_dsn: str) -> None:
    """Idle pooled connections killed by the server are found dead and replaced, not
    handed to the next read to fail it."""
    with PostgresSession(pg_dsn, "s") as session:
        session.append("note", {})

    async def main() -> list[int]:
        reader = PostgresReader(pg_dsn)
        try:
            before = (await reader.snapshot("s")).last_seq
            assert cut_every_other_connection(pg_dsn) >= 1
            after = (await reader.snapshot("s")).last_seq
            page = await reader.tail("s", before=None, limit=5)
            return [before, after, page.events[-1]["seq"]]
        finally:
            await reader.aclose()

    assert asyncio.run(main()) == [0, 0, 0]


def test_a_follow_whose_connections_are_cut_goes_on_with_nothing_missed(pg_dsn: str) -> None:
    with PostgresSession(pg_dsn, "s") as session:
        session.append("note", {})

    async def main() -> list[int]:
        reader = PostgresReader(pg_dsn)
        events = reader.follow("s", after=-1)
        seen = [(await anext(events))["seq"]]
        waiting = asyncio.ensure_future(next_of(events))
        try:
            await asyncio.sleep(0.2)
            assert cut_every_other_connection(pg_dsn) >= 2
            with PostgresSession(pg_dsn, "s") as session:
                for _ in range(3):
                    session.append("note", {})

            async def rest() -> None:
                seen.append((await waiting)["seq"])
                seen.extend([(await anext(events))["seq"] for _ in range(2)])

            await asyncio.wait_for(rest(), 10)
            return seen
        finally:
            waiting.cancel()
            await asyncio.gather(waiting, return_exceptions=True)
            await events.aclose()  # type: ignore[attr-defined]
            await reader.aclose()

    assert asyncio.run(main()) == [0, 1, 2, 3]


def test_a_notify_storm_neither_stops_nor_floods_a_follow(pg_dsn: str) -> None:
    with PostgresSession(pg_dsn, "s") as session:
        session.append("note", {})

    async def main() -> int:
        reader = PostgresReader(pg_dsn)
        events = reader.follow("s", after=0)
        waiting = asyncio.ensure_future(next_of(events))
        try:
            await asyncio.sleep(0.2)
            payloads = [f"{n}:s" for n in range(5000)] + ["x" * 7000, "", ":", "-1:s", "9" * 40]
            with psycopg.connect(pg_dsn, autocommit=True) as conn, conn.transaction():
                for payload in payloads:
                    conn.execute("SELECT pg_notify('dsh_todo', %s)", (payload,))
            await asyncio.sleep(0.5)
            assert not waiting.done()  # woken thousands of times, yet nothing was invented
            with PostgresSession(pg_dsn, "s") as session:
                session.append("turn/start", {})
            event = await asyncio.wait_for(waiting, 10)
            return int(event["seq"])
        finally:
            waiting.cancel()
            await asyncio.gather(waiting, return_exceptions=True)
            await events.aclose()  # type: ignore[attr-defined]
            await reader.aclose()

    assert asyncio.run(main()) == 1


@pytest.mark.parametrize(
    ("kind", "text", "reason"),
    [
        ("note", "[1, 2]", "must be a JSON object"),
        ("note", "null", "must be a JSON object"),
        ("note", '"text"', "must be a JSON object"),
        (EVENT_TYPE, '{"todos": [{"content": "", "status": "done"}]}', "use completed"),
        # refused as not JSON where the parser's depth limit stops it, as a broken plan where
        # it does not (Python 3.13's parser goes deeper)
        (EVENT_TYPE, '{"todos": ' + "[" * 3000 + "]" * 3000 + "}", "(?:not JSON|invalid todo)"),
    ],
)
def test_foreign_rows_of_the_wrong_shape_are_refused_by_every_read(
    pg_dsn: str, kind: str, text: str, reason: str
) -> None:
    with PostgresSession(pg_dsn, "s") as session:
        session.append(EVENT_TYPE, {"todos": [{"content": "A", "status": "pending"}]})
    insert(pg_dsn, "s", 1, kind, text)

    async def main() -> None:
        reader = PostgresReader(pg_dsn)
        try:
            reads = [reader.tail("s", before=None, limit=5), anext(reader.follow("s", after=0))]
            if kind == EVENT_TYPE:
                reads.append(reader.snapshot("s"))
            for read in reads:
                with pytest.raises(InvalidLog, match=f"session 's', seq 1: .*{reason}"):
                    await read
            rows, _ = await reader.sessions("", 10)
            assert [(row.name, row.progress) for row in rows] == [("s", None)] or kind == "note"
        finally:
            await reader.aclose()

    asyncio.run(main())


def test_a_gap_in_the_seqs_of_foreign_rows_stops_a_follow(pg_dsn: str) -> None:
    with PostgresSession(pg_dsn, "s") as session:
        session.append("note", {})
    insert(pg_dsn, "s", 5, "note", "{}")

    async def main() -> None:
        reader = PostgresReader(pg_dsn)
        events = reader.follow("s", after=-1)
        try:
            assert (await anext(events))["seq"] == 0
            with pytest.raises(InvalidLog, match=r"seq 5: follows seq 0 \(events are missing\)"):
                await anext(events)
        finally:
            await reader.aclose()

    asyncio.run(main())


def test_a_session_written_again_between_the_snapshot_and_the_follow_is_replaced(
    pg_dsn: str,
) -> None:
    """The follow goes on from the snapshot's own row: a longer log written in its place
    in between is not continued as if it were the same one."""
    plan = {"todos": [{"content": "A", "status": "pending"}]}
    with PostgresSession(pg_dsn, "s") as session:
        session.append(EVENT_TYPE, plan)

    async def main() -> None:
        reader = PostgresReader(pg_dsn)
        try:
            snapshot = await reader.snapshot("s")
            await asyncio.to_thread(delete_session, pg_dsn, "s")
            with PostgresSession(pg_dsn, "s") as session:
                session.append(EVENT_TYPE, plan)  # the same row, in another transaction
                session.append("note", {})
            with pytest.raises(LogReplaced, match="session 's': seq 0"):
                await anext(reader.follow("s", after=snapshot.last_seq, since=snapshot))
        finally:
            await reader.aclose()

    asyncio.run(main())
