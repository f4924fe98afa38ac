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
    # 2: idempotent appends. A todo/write that carries a tool-call id records the turn it
    # belongs to (the seq of the turn/start before it, -1 before any) and a digest of the id;
    # the unique index records a call id once per turn, whoever writes it. Other rows leave
    # both NULL, so they are neither indexed nor any bigger. Adding NULL columns rewrites
    # nothing; building the index reads the table once.
    f"""
    ALTER TABLE {TABLE} ADD COLUMN IF NOT EXISTS turn_seq bigint,
        ADD COLUMN IF NOT EXISTS call_key bytea;
    CREATE UNIQUE INDEX IF NOT EXISTS {TABLE}_call ON {TABLE} (session_id, turn_seq, call_key)
        WHERE call_key IS NOT NULL;
    CREATE INDEX IF NOT EXISTS {TABLE}_turns ON {TABLE} (session_id, seq DESC)
        WHERE type = '{TURN_START}'
    """,
)
SCHEMA_VERSION = len(MIGRATIONS)

BEGIN = "BEGIN"
INSERT = (
    f"WITH row AS (INSERT INTO {TABLE} (session_id, seq, type, data) "
    "VALUES (%(sid)s, %(seq)s, %(type)s, %(data)s) RETURNING seq) "
    f"SELECT pg_notify('{CHANNEL}', %(payload)s) FROM row"
)
# A repeated call id inserts nothing, so the notify's SELECT yields no row (rowcount 0).
INSERT_CALL = (
    f"WITH row AS (INSERT INTO {TABLE} (session_id, seq, type, data, turn_seq, call_key) "
    "VALUES (%(sid)s, %(seq)s, %(type)s, %(data)s, %(turn)s, %(call)s) "
    "ON CONFLICT (session_id, turn_seq, call_key) WHERE call_key IS NOT NULL DO NOTHING "
    "RETURNING seq) "
    f"SELECT pg_notify('{CHANNEL}', %(payload)s) FROM row"
)
READ_CALL = (
    f"SELECT seq, type, data::text FROM {TABLE} "
    "WHERE session_id = %s AND turn_seq = %s AND call_key = %s"
)
# The newest turn/start (the turn a call id is keyed by): one probe of its partial index.
OPEN = (
    f"SELECT (SELECT max(version) FROM {VERSION_TABLE}), "
    f"(SELECT max(seq) FROM {TABLE} WHERE session_id = %s), "
    f"(SELECT max(seq) FROM {TABLE} WHERE session_id = %s AND type = '{TURN_START}')"
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
