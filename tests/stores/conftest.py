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
from psycopg.conninfo import make_conninfo

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


@contextmanager
def select_only_role(dsn: str, *, statement_timeout: str | None = None) -> Iterator[str]:
    """A conninfo for a new role that may only SELECT from the store's table (with a
    ``statement_timeout`` of its own when given); afterwards this process's pools are
    closed, the role's connections ended and the role dropped."""
    role = f"viewer_{uuid.uuid4().hex[:12]}"
    with psycopg.Connection.connect(dsn, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {role} LOGIN")
        conn.execute(f"GRANT SELECT ON {postgres.TABLE} TO {role}")
        if statement_timeout is not None:
            conn.execute(f"ALTER ROLE {role} SET statement_timeout = '{statement_timeout}'")
    try:
        yield make_conninfo(dsn, user=role)
    finally:
        postgres.close_shared_pools()
        with psycopg.Connection.connect(dsn, autocommit=True) as conn:
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s",
                (role,),
            )
            conn.execute(f"DROP OWNED BY {role}")
            conn.execute(f"DROP ROLE {role}")


def _other_connections(dsn: str, counted: str, where: str = "") -> int:
    """``SELECT <counted>`` over the other connections to ``dsn``'s database."""
    with psycopg.Connection.connect(dsn, autocommit=True) as admin:
        row = admin.execute(
            f"SELECT {counted} FROM pg_stat_activity WHERE datname = current_database() "
            f"AND pid <> pg_backend_pid(){where}"
        ).fetchone()
    assert row is not None
    return int(row[0])


def cut_every_other_connection(dsn: str) -> int:
    """End every other connection to ``dsn``'s database (a failover); how many there were."""
    return _other_connections(dsn, "count(pg_terminate_backend(pid))")


def count_listening(dsn: str) -> int:
    """How many other connections to ``dsn``'s database sit in a LISTEN."""
    return _other_connections(dsn, "count(*)", " AND query LIKE 'LISTEN%%'")
