"""A database as a place of many sessions: the one written last (``pick_log``, what ``dsh-todo
show URL`` reads with no ``--session``) and the sessions whose newest event is old, pruned
(``prune_logs``, ``dsh-todo sessions URL --prune --older-than DAYS``)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

import psycopg
import pytest

from dsh_tool_todo import cli, stores
from dsh_tool_todo.core.contract import EVENT_TYPE
from dsh_tool_todo.errors import UsageError
from dsh_tool_todo.stores.postgres import CHANNEL, PostgresSession, list_sessions, read_tail
from tests.cli.test_cli import assert_usage_error, dsh_todo
from tests.conftest import todo

from .test_admin import url


def _record(dsn: str, session_id: str, content: str, *, age_days: float = 0.0) -> None:
    """One plan in ``session_id``, its rows dated ``age_days`` days back."""
    with PostgresSession(dsn, session_id) as session:
        session.append(EVENT_TYPE, {"todos": [todo(content, "in_progress")]})
    if age_days:
        with psycopg.Connection.connect(dsn, autocommit=True) as conn:
            conn.execute(
                "UPDATE dsh_todo_events SET recorded_at = now() - make_interval(secs => %s) "
                "WHERE session_id = %s",
                (age_days * 86400, session_id),
            )


def test_no_session_picks_the_session_written_last(pg_dsn: str) -> None:
    _record(pg_dsn, "early", "E", age_days=1)
    _record(pg_dsn, "late", "L")
    _record(pg_dsn, "middle", "M", age_days=0.5)

    assert stores.pick_log(pg_dsn) == (pg_dsn, "late")
    assert stores.pick_log(url(pg_dsn), "early") == (url(pg_dsn), "early")


def test_a_database_with_no_session_yet_says_how_to_wait(pg_dsn: str) -> None:
    with pytest.raises(
        UsageError, match=r"/test_\w+: no session in it yet \(`dsh-todo watch` waits for one"
    ):
        stores.pick_log(url(pg_dsn))


def test_show_with_no_session_shows_the_latest_and_names_it(
    pg_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _record(pg_dsn, "early", "Early's", age_days=1)
    _record(pg_dsn, "late", "Late's")

    assert cli.main(["show", url(pg_dsn), "--ascii"]) == 0
    shown = capsys.readouterr()

    assert shown.out.splitlines()[0] == "[>] Late's"
    assert shown.err == (
        "dsh-todo: showing session 'late', the most recently written (--session picks another)\n"
    )


def test_prune_deletes_the_sessions_whose_newest_event_is_older(pg_dsn: str) -> None:
    _record(pg_dsn, "stale", "S", age_days=10)
    _record(pg_dsn, "old", "O", age_days=3.5)
    _record(pg_dsn, "fresh", "F", age_days=1)
    _record(pg_dsn, "now", "N")

    where, named, left = stores.prune_logs(pg_dsn, 3, dry_run=True)
    assert where.startswith("PostgreSQL at 127.0.0.1:")
    assert [name for name, _ in named] == ["old", "stale"]
    assert left == []
    assert len(list_sessions(pg_dsn)) == 4

    _, pruned, left = stores.prune_logs(url(pg_dsn), 3)

    assert pruned == named
    assert left == []
    ago = datetime.now(timezone.utc) - pruned[1][1]
    assert timedelta(days=10) <= ago < timedelta(days=10, minutes=5)
    assert pruned[1][1].tzinfo == timezone.utc
    assert sorted(info.session_id for info in list_sessions(pg_dsn)) == ["fresh", "now"]
    with psycopg.Connection.connect(pg_dsn) as conn:  # the summary follows the rows
        rows = conn.execute("SELECT session_id FROM dsh_todo_sessions ORDER BY 1").fetchall()
    assert rows == [("fresh",), ("now",)]
    assert stores.prune_logs(pg_dsn, 1e308) == (where, [], [])  # older than anything: no error


def test_a_pruned_session_is_announced_to_its_followers(pg_dsn: str) -> None:
    with psycopg.Connection.connect(pg_dsn, autocommit=True) as listener:
        for session_id, age in (("stale", "10 days"), ("fresh", "1 hour")):  # no writer's notices
            listener.execute(
                "INSERT INTO dsh_todo_events (session_id, seq, type, data, recorded_at) "
                "VALUES (%s, 0, 'note', '{}', now() - %s::interval)",
                (session_id, age),
            )
        listener.execute(f"LISTEN {CHANNEL}")
        stores.prune_logs(pg_dsn, 1)
        heard = [notice.payload for notice in listener.notifies(timeout=30, stop_after=1)]
    assert heard == ["0:stale"]  # as delete_session wakes them: the log they read is gone


def test_the_cli_prunes_a_database_and_names_what_it_deleted(pg_dsn: str) -> None:
    with psycopg.Connection.connect(pg_dsn, autocommit=True) as conn:  # a foreign writer's id
        conn.execute(
            "INSERT INTO dsh_todo_events (session_id, seq, type, data, recorded_at) "
            "VALUES (%s, 0, 'note', '{}', now() - interval '10 days')",
            ("stale\x1b[2J",),
        )
    _record(pg_dsn, "fresh", "F")

    listed = dsh_todo("sessions", url(pg_dsn), "--prune", "--older-than", "2", "--dry-run")
    assert listed.stdout.splitlines()[0].startswith(
        "would delete session 'stale\\x1b[2J' (last written "
    )
    assert len(list_sessions(pg_dsn)) == 2

    done = dsh_todo("sessions", url(pg_dsn), "--prune", "--older-than", "2").stdout.splitlines()

    assert done[0].startswith("deleted session 'stale\\x1b[2J' (last written 20")
    assert done[1].startswith("deleted 1 session last written over 2 days ago in PostgreSQL at")
    assert "\x1b" not in "".join(done)
    assert [info.session_id for info in list_sessions(pg_dsn)] == ["fresh"]
    again = dsh_todo("sessions", url(pg_dsn), "--prune", "--older-than", "2").stdout
    assert again.startswith("no session in PostgreSQL at 127.0.0.1:")


def test_the_cli_reads_a_conninfo_as_sessions_does(pg_dsn: str) -> None:
    _record(pg_dsn, "agent", "Conninfo's")
    shown = dsh_todo("show", pg_dsn, "--session", "agent", "--ascii").stdout
    assert shown.splitlines()[0] == "[>] Conninfo's"
    run = dsh_todo("show", pg_dsn, "--session", "nobody", check=False)
    assert_usage_error(run, r"no session 'nobody'")


PAUSE = 7_320_001
"""The advisory lock a paused append waits for, held by the test."""


def _pause_appends(dsn: str, when: str) -> None:
    """From now on every row inserted into the events table waits, ``BEFORE`` it is written or
    ``AFTER`` (once its session's summary row is updated), until the test lets :data:`PAUSE` go."""
    with psycopg.Connection.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "CREATE FUNCTION test_pause() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            f"PERFORM pg_advisory_lock_shared({PAUSE}); "
            f"PERFORM pg_advisory_unlock_shared({PAUSE}); RETURN NEW; END $$"
        )
        conn.execute(  # named after the summary's trigger: AFTER, it runs second
            f"CREATE TRIGGER test_pause {when} INSERT ON dsh_todo_events "
            "FOR EACH ROW EXECUTE FUNCTION test_pause()"
        )


def _until(done: Callable[[], bool], what: str, within: float = 30) -> None:
    deadline = time.monotonic() + within
    while not done():
        assert time.monotonic() < deadline, f"not within {within} s: {what}"
        time.sleep(0.01)


def _waiting(conn: psycopg.Connection[Any], advisory: bool) -> bool:
    """Whether a backend waits for an advisory lock (or, not ``advisory``, for any other)."""
    row = conn.execute(
        "SELECT count(*) FROM pg_locks WHERE NOT granted AND (locktype = 'advisory') = %s",
        (advisory,),
    ).fetchone()
    return bool(row and row[0])


@pytest.mark.parametrize("when", ["BEFORE", "AFTER"])
def test_a_session_appended_to_while_the_prune_runs_is_kept_whole(pg_dsn: str, when: str) -> None:
    _record(pg_dsn, "busy", "Written 10 days ago", age_days=10)
    _record(pg_dsn, "idle", "I", age_days=10)
    _pause_appends(pg_dsn, when)
    acknowledged: list[dict[str, Any]] = []
    pruned: list[Any] = []
    with (
        psycopg.Connection.connect(pg_dsn, autocommit=True) as holder,
        PostgresSession(pg_dsn, "busy") as writer,
    ):
        holder.execute("SELECT pg_advisory_lock(%s)", (PAUSE,))
        plan = {"todos": [todo("Written now", "in_progress")]}
        appending = threading.Thread(
            target=lambda: acknowledged.append(dict(writer.append(EVENT_TYPE, plan)))
        )
        appending.start()
        _until(lambda: _waiting(holder, advisory=True), "the append waits, mid-statement")
        pruning = threading.Thread(target=lambda: pruned.append(stores.prune_logs(pg_dsn, 1)))
        pruning.start()
        _until(
            lambda: not pruning.is_alive() or _waiting(holder, advisory=False),
            "the prune ends, or waits for the append",
        )
        holder.execute("SELECT pg_advisory_unlock(%s)", (PAUSE,))
        appending.join(timeout=30)
        pruning.join(timeout=30)

    assert [event["seq"] for event in acknowledged] == [1]
    kept = read_tail(pg_dsn, "busy")
    assert [event["seq"] for event in kept] == [0, 1]  # no acknowledged write lost, nor cut off
    _, deleted, left = pruned[0]
    assert [name for name, _ in deleted] == ["idle"]
    assert [(name, why) for name, _, why in left] == [("busy", "written while the prune ran")]
    assert [info.session_id for info in list_sessions(pg_dsn)] == ["busy"]
