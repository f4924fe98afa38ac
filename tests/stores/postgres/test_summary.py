"""The PostgreSQL session summary: filled on upgrade, kept by triggers, what the list reads."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import psycopg
import pytest

from dsh_tool_todo.core.contract import EVENT_TYPE
from dsh_tool_todo.errors import StoreNotReady
from dsh_tool_todo.stores import postgres
from dsh_tool_todo.stores.postgres import PostgresReader, PostgresSession, _sql

PLAN = {"todos": [{"content": "A", "status": "in_progress"}]}


def summary(dsn: str) -> dict[str, tuple[Any, ...]]:
    with psycopg.Connection.connect(dsn) as conn:
        rows = conn.execute(f"SELECT session_id, last_seq, parent FROM {_sql.SUMMARY}").fetchall()
    return {row[0]: tuple(row[1:]) for row in rows}


def insert(conn: psycopg.Connection[Any], sid: str, seq: int, kind: str, data: object) -> None:
    conn.execute(
        f"INSERT INTO {postgres.TABLE} (session_id, seq, type, data) VALUES (%s, %s, %s, %s)",
        (sid, seq, kind, json.dumps(data)),
    )


def test_an_upgrade_from_version_1_fills_the_summary_and_keeps_it(empty_pg_dsn: str) -> None:
    with psycopg.Connection.connect(empty_pg_dsn, autocommit=True) as conn:
        conn.execute(_sql.VERSION_DDL)
        for statement in _sql.MIGRATIONS_BY_STATEMENT[0]:
            conn.execute(statement.encode())
        conn.execute(_sql.RECORD_VERSION, (1,))
        insert(conn, "child", 0, "session/link", {"parent": "boss"})
        insert(conn, "child", 1, "session/link", {"parent": "later"})
        insert(conn, "child", 2, EVENT_TYPE, PLAN)
        insert(conn, "odd", 0, "session/link", {"parent": 7})  # not a key: no parent
        insert(conn, "boss", 0, EVENT_TYPE, PLAN)

    async def listed() -> None:
        reader = PostgresReader(empty_pg_dsn)
        try:
            await reader.sessions("", 10)
        finally:
            await reader.aclose()

    with pytest.raises(StoreNotReady, match=r"older than 3.*db init"):
        asyncio.run(listed())

    assert postgres.setup(empty_pg_dsn) == postgres.SCHEMA_VERSION
    assert summary(empty_pg_dsn) == {
        "child": (2, "boss"),
        "odd": (0, None),
        "boss": (0, None),
    }
    with PostgresSession(empty_pg_dsn, "boss") as session:
        session.append("turn/start", {})
    assert summary(empty_pg_dsn)["boss"] == (1, None)


def test_deletes_updates_and_truncates_are_summed_up_again(pg_dsn: str) -> None:
    with psycopg.Connection.connect(pg_dsn, autocommit=True) as conn:
        insert(conn, "a", 0, "session/link", {"parent": "p"})
        insert(conn, "a", 1, EVENT_TYPE, PLAN)
        insert(conn, "b", 0, EVENT_TYPE, PLAN)
        assert summary(pg_dsn) == {"a": (1, "p"), "b": (0, None)}

        postgres.delete_session(pg_dsn, "b")
        assert summary(pg_dsn) == {"a": (1, "p")}

        conn.execute(f"DELETE FROM {postgres.TABLE} WHERE session_id = 'a' AND seq = 1")
        assert summary(pg_dsn) == {"a": (0, "p")}

        conn.execute(f"UPDATE {postgres.TABLE} SET session_id = 'c' WHERE session_id = 'a'")
        assert summary(pg_dsn) == {"c": (0, "p")}

        conn.execute(f"TRUNCATE {postgres.TABLE}")
        assert summary(pg_dsn) == {}


def test_the_list_does_not_read_the_events_table(pg_dsn: str) -> None:
    with psycopg.Connection.connect(pg_dsn, autocommit=True) as conn:
        for number in range(50):
            insert(conn, f"s{number}", 0, EVENT_TYPE, PLAN)
        plan = conn.execute(f"EXPLAIN {_sql.LIST_SUMMARY}").fetchall()
        ready = conn.execute(f"EXPLAIN {_sql.LIST_READY}").fetchall()
    assert postgres.TABLE + " " not in " ".join(row[0] for row in plan) + " "
    # the readiness check names the events table but a false filter keeps it unread
    assert "One-Time Filter: false" in " ".join(row[0] for row in ready)
