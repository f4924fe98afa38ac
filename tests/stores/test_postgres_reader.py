"""The reader contract, run against a PostgreSQL store."""

from __future__ import annotations

import json
from collections.abc import Iterator

import psycopg
import pytest

from dsh_tool_todo.protocols import LogReader
from dsh_tool_todo.stores.postgres import TABLE, PostgresReader, PostgresSession, delete_session

from .reader_contract import Deleter, Event, RawWriter, ReaderContract, Runner, Writer


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
