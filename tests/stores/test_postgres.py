"""The PostgreSQL store: the shared contract, then what only this store has.

Each test works in a database of its own (see conftest.py), so notifications
and rows never cross between tests.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import psycopg
import pytest
from psycopg_pool import ConnectionPool

from dsh_tool_todo.stores import postgres
from dsh_tool_todo.stores.postgres import PostgresSession

from .contract import DurableContract, Event, Opener

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
