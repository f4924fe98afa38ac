"""The schema and the statements: table, channel, migrations, SQL text (no I/O)."""

from __future__ import annotations

from collections.abc import Collection

from psycopg import sql

from ...core.contract import EVENT_TYPE, LINK_EVENT_TYPE, TURN_START

TABLE = "dsh_todo_events"
VERSION_TABLE = "dsh_todo_schema"
CHANNEL = "dsh_todo_events"
RESUME_TYPES: tuple[str, ...] = (EVENT_TYPE, TURN_START)
"""The event types that each fix the whole plan: what the partial index covers."""

# Version 1 as text (MIGRATIONS_BY_STATEMENT below lists every version).
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
SUMMARY = "dsh_todo_sessions"
"""One row per session, kept by triggers on the events table: what the session list reads."""

_FIRST_PARENT = (
    f"(SELECT l.data->>'parent' FROM {TABLE} AS l WHERE l.session_id = e.session_id "
    f"AND l.seq = 0 AND l.type = '{LINK_EVENT_TYPE}' "
    "AND json_typeof(l.data->'parent') = 'string' AND l.data->>'parent' <> '')"
)
# Whole statements, each run as it is: the trigger bodies hold semicolons of their own.
SUMMARY_MIGRATION: tuple[str, ...] = (
    f"""
    CREATE TABLE IF NOT EXISTS {SUMMARY} (
        session_id text PRIMARY KEY,
        last_seq bigint NOT NULL,
        last_at timestamptz NOT NULL,
        parent text
    )
    """,
    f"CREATE INDEX IF NOT EXISTS {SUMMARY}_recent ON {SUMMARY} (last_at DESC, session_id)",
    # An append upserts its session's row; the parent is the head link's (seq 0: links.link_of).
    f"""
    CREATE OR REPLACE FUNCTION {SUMMARY}_append() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        INSERT INTO {SUMMARY} AS s (session_id, last_seq, last_at, parent)
        VALUES (NEW.session_id, NEW.seq, NEW.recorded_at,
            CASE WHEN NEW.seq = 0 AND NEW.type = '{LINK_EVENT_TYPE}'
                AND json_typeof(NEW.data->'parent') = 'string' AND NEW.data->>'parent' <> ''
            THEN NEW.data->>'parent' END)
        ON CONFLICT (session_id) DO UPDATE SET
            last_seq = GREATEST(s.last_seq, EXCLUDED.last_seq),
            last_at = GREATEST(s.last_at, EXCLUDED.last_at),
            parent = COALESCE(s.parent, EXCLUDED.parent);
        RETURN NULL;
    END $$
    """,
    # Rows deleted or changed by hand (a session deleted, a foreign UPDATE): the sessions
    # they touched are summed up again from what is left.
    f"""
    CREATE OR REPLACE FUNCTION {SUMMARY}_resum(ids text[]) RETURNS void LANGUAGE sql AS $$
        DELETE FROM {SUMMARY} WHERE session_id = ANY(ids);
        INSERT INTO {SUMMARY} (session_id, last_seq, last_at, parent)
        SELECT e.session_id, max(e.seq), max(e.recorded_at), {_FIRST_PARENT}
        FROM {TABLE} AS e WHERE e.session_id = ANY(ids) GROUP BY e.session_id;
    $$
    """,
    f"""
    CREATE OR REPLACE FUNCTION {SUMMARY}_delete() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM {SUMMARY}_resum(ARRAY(SELECT DISTINCT session_id FROM gone));
        RETURN NULL;
    END $$
    """,
    f"""
    CREATE OR REPLACE FUNCTION {SUMMARY}_update() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM {SUMMARY}_resum(ARRAY(
            SELECT session_id FROM gone UNION SELECT session_id FROM came));
        RETURN NULL;
    END $$
    """,
    f"""
    CREATE OR REPLACE FUNCTION {SUMMARY}_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        TRUNCATE {SUMMARY};
        RETURN NULL;
    END $$
    """,
    f"DROP TRIGGER IF EXISTS {SUMMARY}_append ON {TABLE}",
    f"""
    CREATE TRIGGER {SUMMARY}_append AFTER INSERT ON {TABLE}
    FOR EACH ROW EXECUTE FUNCTION {SUMMARY}_append()
    """,
    f"DROP TRIGGER IF EXISTS {SUMMARY}_delete ON {TABLE}",
    f"""
    CREATE TRIGGER {SUMMARY}_delete AFTER DELETE ON {TABLE}
    REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION {SUMMARY}_delete()
    """,
    f"DROP TRIGGER IF EXISTS {SUMMARY}_update ON {TABLE}",
    f"""
    CREATE TRIGGER {SUMMARY}_update AFTER UPDATE ON {TABLE}
    REFERENCING OLD TABLE AS gone NEW TABLE AS came
    FOR EACH STATEMENT EXECUTE FUNCTION {SUMMARY}_update()
    """,
    f"DROP TRIGGER IF EXISTS {SUMMARY}_truncate ON {TABLE}",
    f"""
    CREATE TRIGGER {SUMMARY}_truncate AFTER TRUNCATE ON {TABLE}
    FOR EACH STATEMENT EXECUTE FUNCTION {SUMMARY}_truncate()
    """,
    # Existing sessions, once. The triggers above hold the table's SHARE ROW EXCLUSIVE
    # lock until this transaction ends, so no append slips between the two.
    f"""
    INSERT INTO {SUMMARY} (session_id, last_seq, last_at, parent)
    SELECT e.session_id, max(e.seq), max(e.recorded_at), {_FIRST_PARENT}
    FROM {TABLE} AS e GROUP BY e.session_id
    ON CONFLICT (session_id) DO NOTHING
    """,
)
# 3: idempotent appends. A todo/write that carries a tool-call id records the turn it
# belongs to (the seq of the turn/start before it, -1 before any) and a digest of its id
# and list (_calls.call_key); the unique index records each (id, list) once per turn,
# whoever writes it: a race of two writers is decided by the index. Other rows leave
# both NULL, so they are neither indexed nor any bigger. Adding NULL columns rewrites
# nothing; building the index reads the table once.
CALL_MIGRATION: tuple[str, ...] = (
    f"""
    ALTER TABLE {TABLE} ADD COLUMN IF NOT EXISTS turn_seq bigint,
        ADD COLUMN IF NOT EXISTS call_key bytea
    """,
    f"""
    CREATE UNIQUE INDEX IF NOT EXISTS {TABLE}_call ON {TABLE} (session_id, turn_seq, call_key)
        WHERE call_key IS NOT NULL
    """,
    f"""
    CREATE INDEX IF NOT EXISTS {TABLE}_turns ON {TABLE} (session_id, seq DESC)
        WHERE type = '{TURN_START}'
    """,
)
REQUESTS = "dsh_todo_requests"
"""A person's requests waiting for a session's writer (stores/_inbox.py): never in the log."""
REQUESTS_CHANNEL = "dsh_todo_requests"
REQUESTS_MIGRATION: tuple[str, ...] = (
    f"""
    CREATE TABLE IF NOT EXISTS {REQUESTS} (
        id bigserial PRIMARY KEY,
        session_id text NOT NULL,
        entry json NOT NULL,
        filed_at timestamptz NOT NULL DEFAULT now()
    )
    """,
    f"CREATE INDEX IF NOT EXISTS {REQUESTS}_session ON {REQUESTS} (session_id, id)",
)
# The position of a migration in this list is the schema version it brings.
MIGRATIONS_BY_STATEMENT: tuple[tuple[str, ...], ...] = (
    tuple(part for part in MIGRATIONS[0].split(";") if part.strip()),
    SUMMARY_MIGRATION,
    CALL_MIGRATION,
    REQUESTS_MIGRATION,
)
"""Each migration as the statements to run, in order (``MIGRATIONS`` holds the first as text)."""
SCHEMA_VERSION = len(MIGRATIONS_BY_STATEMENT)

FILE_REQUEST = (
    f"WITH filed AS (INSERT INTO {REQUESTS} (session_id, entry) VALUES (%s, %s) RETURNING id) "
    f"SELECT id, pg_notify('{REQUESTS_CHANNEL}', %s) FROM filed"
)
REQUESTS_LOCK = "SELECT pg_advisory_xact_lock(hashtextextended('dsh_todo_requests ' || %s, 0))"
READ_REQUESTS = (
    f"SELECT id, entry::text FROM {REQUESTS} WHERE session_id = %s AND id > %s ORDER BY id"
)
# An append holds its session's summary row (KEY SHARE: appends never wait for each other)
# from before its row is written until it commits; a prune locks the rows of the sessions it
# deletes, skipping those held, so it never deletes a session while an append is under way.
_HELD = (
    f"FROM (VALUES (1)) AS one LEFT JOIN (SELECT 1 FROM {SUMMARY} "
    "WHERE session_id = %(sid)s FOR KEY SHARE) AS held ON true"
)
INSERT = (
    f"INSERT INTO {TABLE} (session_id, seq, type, data) "
    f"SELECT %(sid)s::text, %(seq)s::bigint, %(type)s::text, %(data)s::json {_HELD}"
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
# A repeated call id inserts nothing (rowcount 0): the after-commit notify is for rows only.
INSERT_CALL = (
    f"INSERT INTO {TABLE} (session_id, seq, type, data, turn_seq, call_key) "
    "SELECT %(sid)s::text, %(seq)s::bigint, %(type)s::text, %(data)s::json, "
    f"%(turn)s::bigint, %(call)s::bytea {_HELD} "
    "ON CONFLICT (session_id, turn_seq, call_key) WHERE call_key IS NOT NULL DO NOTHING"
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
# The rows after a seq, for several sessions in one query, each row numbered by the request it
# answers: followers woken together read together. The inserting transaction (xmin) tells a
# row from one that a recreated session holds with the same type and data.
READ_AFTER_EACH = (
    "SELECT wanted.number, e.seq, e.type, e.data::text, e.xmin::text::bigint "
    "FROM unnest(%s::text[], %s::bigint[]) WITH ORDINALITY AS wanted(id, after, number) "
    f"CROSS JOIN LATERAL (SELECT seq, type, data, xmin FROM {TABLE} "
    "WHERE session_id = wanted.id AND seq > wanted.after ORDER BY seq LIMIT %s) AS e "
    "ORDER BY wanted.number, e.seq"
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
LIST_SUMMARY = (
    f"SELECT session_id, last_seq, last_at, parent FROM {SUMMARY} ORDER BY last_at DESC, session_id"
)
# The schema version, and the events table named (never scanned: a false filter), so a
# database whose table is gone says so rather than listing a summary left behind.
LIST_READY = (
    f"SELECT (SELECT max(version) FROM {VERSION_TABLE}), EXISTS (SELECT 1 FROM {TABLE} WHERE false)"
)
# The sessions active since a time, and how many there are: what a watched list polls
# (an index range on last_at, and an index-only count; never the events table).
RECENT_SUMMARY = (
    f"SELECT session_id, last_seq, last_at FROM {SUMMARY} WHERE last_at > %s "
    f"UNION ALL SELECT NULL, count(*), NULL FROM {SUMMARY}"
)
DELETE = f"DELETE FROM {TABLE} WHERE session_id = %s"
# A deleted or pruned session's requests go with it; a database at version 3 has no table.
HAS_REQUESTS = f"SELECT to_regclass('{REQUESTS}') IS NOT NULL"
DELETE_REQUESTS = f"DELETE FROM {REQUESTS} WHERE session_id = ANY(%s)"
# The session written last: one step down the summary's (last_at DESC, session_id) index.
LATEST = f"SELECT session_id FROM {SUMMARY} ORDER BY last_at DESC, session_id LIMIT 1"
# The sessions whose newest event is older than %(days)s days (the summary's last_at: an index
# range), by id. PRUNE locks their summary rows, skipping a row an append holds, and deletes
# the rows of those it locked, in one statement: a row an append committed after the
# statement's snapshot updated the summary's, which the lock reads again (too recent now:
# kept). Each session seen old comes back, with whether it was deleted; the summary's rows go
# by its delete trigger.
_STALE = (
    f"SELECT session_id, last_at FROM {SUMMARY} "
    "WHERE last_at < now() - make_interval(secs => %(days)s * 86400.0)"
)
STALE = f"{_STALE} ORDER BY session_id"
PRUNE = (
    f"WITH seen AS ({_STALE}), stale AS ({_STALE} FOR UPDATE SKIP LOCKED), "
    f"gone AS (DELETE FROM {TABLE} AS e USING stale WHERE e.session_id = stale.session_id) "
    "SELECT seen.session_id, seen.last_at, stale.session_id IS NOT NULL "
    "FROM seen LEFT JOIN stale USING (session_id) ORDER BY seen.session_id"
)
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
