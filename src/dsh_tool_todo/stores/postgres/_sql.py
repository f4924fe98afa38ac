"""The schema and the statements: table, channel, migrations, SQL text (no I/O)."""

from __future__ import annotations

from collections.abc import Collection

from psycopg import sql

from ...contract import EVENT_TYPE, TURN_START

TABLE = "dsh_todo_events"
VERSION_TABLE = "dsh_todo_schema"
CHANNEL = "dsh_todo_events"
RESUME_TYPES: tuple[str, ...] = (EVENT_TYPE, TURN_START)
"""The event types that each fix the whole plan: what the partial index covers."""

# The position of a migration in this list is the schema version it brings.
MIGRATIONS: tuple[str, ...] = (
    f"""
    CREATE TABLE IF NOT EXISTS {TABLE} (
        session_id text NOT NULL,
        seq bigint NOT NULL CHECK (seq >= 0),
        type text NOT NULL,
        data json NOT NULL,
        recorded_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (session_id, seq)
    );
    CREATE INDEX IF NOT EXISTS {TABLE}_resume ON {TABLE} (session_id, seq DESC)
        WHERE type IN ('{EVENT_TYPE}', '{TURN_START}')
    """,
)
SCHEMA_VERSION = len(MIGRATIONS)

INSERT = (
    f"INSERT INTO {TABLE} (session_id, seq, type, data) "
    "VALUES (%(sid)s, %(seq)s, %(type)s, %(data)s)"
)
# The notifier's transaction (see _notify.py): a NOTIFY per session, committed without waiting
# for a WAL flush (it carries no data), so the server's notify lock is held for microseconds.
NOTIFY = (
    f"SELECT pg_notify('{CHANNEL}', payload) "
    "FROM set_config('synchronous_commit', 'off', true) AS cfg, unnest(%s::text[]) AS payload"
)
# The hub's catch-up poll: the newest seq of each followed session, one primary-key probe each.
NEWEST = (
    f"SELECT id, (SELECT max(seq) FROM {TABLE} WHERE session_id = id) FROM unnest(%s::text[]) AS id"
)
OPEN = (
    f"SELECT (SELECT max(version) FROM {VERSION_TABLE}), "
    f"(SELECT max(seq) FROM {TABLE} WHERE session_id = %s)"
)
READ_ONE = f"SELECT type, data::text FROM {TABLE} WHERE session_id = %s AND seq = %s"
READ_AFTER = (
    f"SELECT seq, type, data::text FROM {TABLE} "
    "WHERE session_id = %s AND seq > %s ORDER BY seq LIMIT %s"
)
READ_BEFORE = (
    f"SELECT seq, type, data::text FROM {TABLE} "
    "WHERE session_id = %s AND seq <= %s ORDER BY seq DESC LIMIT %s"
)
LAST_SEQ = f"SELECT max(seq) FROM {TABLE} WHERE session_id = %s"
LIST = (
    f"SELECT session_id, count(*), max(recorded_at) FROM {TABLE} "
    "GROUP BY session_id ORDER BY max(recorded_at) DESC, session_id"
)
DELETE = f"DELETE FROM {TABLE} WHERE session_id = %s"
VERSION_DDL = (
    f"CREATE TABLE IF NOT EXISTS {VERSION_TABLE} "
    "(version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
)
READ_VERSION = f"SELECT max(version) FROM {VERSION_TABLE}"
RECORD_VERSION = f"INSERT INTO {VERSION_TABLE} (version) VALUES (%s)"
SETUP_LOCK = "SELECT pg_advisory_xact_lock(hashtext('dsh_todo_events setup'))"
MAX_BATCH = 500
"""Rows a follower reads at once."""


def latest_query(types: Collection[str]) -> sql.Composed:
    # Literal types (not a parameter), so the planner sees they imply the partial index's predicate.
    return sql.SQL(
        "SELECT seq, type, data::text FROM {} WHERE session_id = %s AND type IN ({}) "
        "ORDER BY seq DESC LIMIT 1"
    ).format(sql.Identifier(TABLE), sql.SQL(", ").join(sql.Literal(t) for t in sorted(types)))
