"""PostgreSQL for the store tests: a fresh database per test on the machine's server.

The server (127.0.0.1:5432, trust authentication) is part of this project's
machines and CI; a test that needs it fails, never skips, when it cannot be
reached. ``DSH_TODO_TEST_DSN`` points the tests at another server.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
import pytest

from dsh_tool_todo.stores import postgres

ADMIN_DSN = os.environ.get("DSH_TODO_TEST_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")


def admin_connection() -> psycopg.Connection[tuple[object, ...]]:
    try:
        return psycopg.Connection.connect(ADMIN_DSN, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as error:
        pytest.fail(
            f"PostgreSQL is needed by this test and does not answer at {ADMIN_DSN} "
            f"({str(error).strip()}); start it (.ci/run does) or set DSH_TODO_TEST_DSN",
            pytrace=False,
        )


def database_dsn(name: str) -> str:
    params = psycopg.conninfo.conninfo_to_dict(ADMIN_DSN)
    params["dbname"] = name
    return psycopg.conninfo.make_conninfo(**{k: str(v) for k, v in params.items()})


@pytest.fixture
def pg_dsn() -> Iterator[str]:
    """A conninfo string for a new, set-up database of this test's own, dropped afterwards."""
    with fresh_database() as dsn:
        postgres.setup(dsn)
        yield dsn


@pytest.fixture
def empty_pg_dsn() -> Iterator[str]:
    """A new database without the store's table."""
    with fresh_database() as dsn:
        yield dsn


@contextmanager
def fresh_database() -> Iterator[str]:
    """``CREATE DATABASE test_<uuid>``; afterwards close this process's pools and drop it."""
    name = f"test_{uuid.uuid4().hex}"
    with admin_connection() as conn:
        conn.execute(f"CREATE DATABASE {name}")
    try:
        yield database_dsn(name)
    finally:
        postgres.close_shared_pools()
        with admin_connection() as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
