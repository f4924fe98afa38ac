"""``dsh-todo`` on PostgreSQL: show, watch, sessions and db init, as a user runs them."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dsh_tool_todo.core.contract import EVENT_TYPE
from dsh_tool_todo.stores import postgres
from dsh_tool_todo.stores.postgres import PostgresSession
from tests.cli.test_cli import ENV, assert_usage_error, dsh_todo
from tests.stores.contract import PLAN

SESSION = "agent-7"


def url(dsn: str) -> str:
    """The conninfo the fixtures make, as the postgresql:// URL a user types."""
    import psycopg.conninfo

    params = psycopg.conninfo.conninfo_to_dict(dsn)
    return f"postgresql://{params['user']}@{params['host']}:{params['port']}/{params['dbname']}"


@pytest.fixture
def db(pg_dsn: str) -> str:
    with PostgresSession(pg_dsn, SESSION) as session:
        session.append(EVENT_TYPE, {"todos": PLAN})
    return url(pg_dsn)


def test_db_init_sets_a_database_up_and_is_safe_to_run_again(empty_pg_dsn: str) -> None:
    for _ in range(2):
        run = dsh_todo("db", "init", url(empty_pg_dsn))
        assert run.stdout.startswith(
            f"schema version {postgres.SCHEMA_VERSION} ready in PostgreSQL at 127.0.0.1:"
        )
    assert dsh_todo("sessions", url(empty_pg_dsn)).stdout.startswith("no sessions in")


def test_show_reads_a_session_from_a_url_in_every_format(db: str) -> None:
    assert json.loads(dsh_todo("show", db, "--session", SESSION, "--format", "json").stdout) == PLAN
    short = db.replace("postgresql://", "postgres://", 1)
    text = dsh_todo("show", short, "--session", SESSION, "--ascii").stdout
    assert "Add the --json flag" in text
    acp = json.loads(dsh_todo("show", db, "--session", SESSION, "--format", "acp").stdout)
    assert [entry["content"] for entry in acp["entries"]] == [item["content"] for item in PLAN]


@pytest.mark.parametrize(
    ("args", "pattern"),
    [
        (("--session", "nobody"), r"no session 'nobody'"),
        (("--session", ""), r"a session id must have 1 to 200 characters"),
    ],
)
def test_show_refuses_what_it_cannot_read_in_one_line(
    db: str, args: tuple[str, ...], pattern: str
) -> None:
    assert_usage_error(dsh_todo("show", db, *args, check=False), pattern)


def test_session_goes_with_a_directory_or_a_url_not_a_file(tmp_path: Path) -> None:
    (tmp_path / "plan.jsonl").write_text("", encoding="utf-8")
    run = dsh_todo("show", str(tmp_path / "plan.jsonl"), "--session", SESSION, check=False)
    assert_usage_error(run, r"plan\.jsonl is one log: --session goes with a directory of logs or")


@pytest.mark.parametrize(
    "command",
    [
        ("show", "postgresql://postgres@127.0.0.1:1/none", "--session", "a"),
        ("watch", "postgresql://postgres@127.0.0.1:1/none", "--session", "a"),
        ("sessions", "postgresql://postgres@127.0.0.1:1/none"),
        ("db", "init", "postgresql://postgres@127.0.0.1:1/none"),
        ("sessions", "postgresql://nobody@127.0.0.1:5432/none"),
        ("sessions", "postgresql://postgres@127.0.0.1:5432/x?sslmode=bogus"),
    ],
)
def test_connection_errors_are_one_line_and_exit_2(command: tuple[str, ...]) -> None:
    assert_usage_error(dsh_todo(*command, check=False), r"PostgreSQL at 127\.0\.0\.1:(1|5432)/")


def test_a_database_without_the_table_says_to_run_db_init(empty_pg_dsn: str) -> None:
    run = dsh_todo("show", url(empty_pg_dsn), "--session", "a", check=False)
    assert_usage_error(run, r"run `dsh-todo db init DSN`")


def test_sessions_prints_the_tree_and_deletes(db: str, pg_dsn: str) -> None:
    with PostgresSession(pg_dsn, "other") as other:
        other.append("turn/start", {})
        other.append("turn/start", {})
    with PostgresSession(pg_dsn, "helper", parent=SESSION, parent_call_id="call_1") as child:
        child.append(EVENT_TYPE, {"todos": PLAN})
    lines = dsh_todo("sessions", db).stdout.splitlines()
    assert [line.split("\t")[:2] for line in lines] == [
        ["other", "no plan"],
        [SESSION, "1/2 done"],
        ["  helper", "1/2 done"],
    ]
    assert lines[0].split("\t")[2].startswith("last 20")
    (root,) = [
        node
        for node in json.loads(dsh_todo("sessions", db, "--json").stdout)["sessions"]
        if node["key"] == SESSION
    ]
    assert [(child["key"], child["parent"]) for child in root["children"]] == [("helper", SESSION)]
    assert root["inProgress"] == ["Add the --json flag"]
    dsh_todo("sessions", db, "--delete", "helper")
    assert dsh_todo("sessions", db, "--delete", "other").stdout == (
        "deleted session 'other': 2 events\n"
    )
    assert [line.split("\t")[0] for line in dsh_todo("sessions", db).stdout.splitlines()] == [
        SESSION
    ]
    assert_usage_error(
        dsh_todo("sessions", db, "--delete", "other", check=False), r"no session 'other'"
    )


def test_watch_redraws_when_a_writer_in_another_process_records_a_plan(
    db: str, pg_dsn: str
) -> None:
    watcher = subprocess.Popen(
        [sys.executable, "-m", "dsh_tool_todo", "watch", db, "--session", SESSION, "--ascii"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        encoding="utf-8",
        env=ENV,
    )
    try:
        assert watcher.stdout is not None
        seen = ""
        while "Add the --json flag" not in seen:
            seen += watcher.stdout.readline()
        with PostgresSession(pg_dsn, SESSION) as session:
            time.sleep(0.5)  # the watcher is listening by now; a late start would catch up anyway
            session.append("note", {})
            session.append(EVENT_TYPE, {"todos": [{"content": "Ship", "status": "pending"}]})
        deadline = time.monotonic() + 20
        while "Ship" not in seen and time.monotonic() < deadline:
            seen += watcher.stdout.readline()
        assert "Ship" in seen
        assert seen.count(f"{SESSION} (PostgreSQL at") == 2  # drawn twice: the note drew nothing
    finally:
        watcher.terminate()
        watcher.communicate(timeout=10)


def test_show_writes_a_lone_surrogate_from_the_database_as_its_json_escape(pg_dsn: str) -> None:
    hostile = [{"content": "half \ud800 of a pair", "status": "pending"}]
    with PostgresSession(pg_dsn, SESSION) as session:
        session.append(EVENT_TYPE, {"todos": hostile})
    run = dsh_todo("show", url(pg_dsn), "--session", SESSION, "--format", "json")
    assert "\\ud800" in run.stdout
    assert json.loads(run.stdout) == hostile
    text = dsh_todo("show", url(pg_dsn), "--session", SESSION, "--ascii").stdout
    assert "half \\ud800 of a pair" in text


def test_a_password_in_the_url_never_reaches_the_error_line() -> None:
    run = dsh_todo("sessions", "postgresql://postgres:s3cr3t@127.0.0.1:1/none", check=False)
    assert_usage_error(run, r"PostgreSQL at 127\.0\.0\.1:1/none: ")
    assert "s3cr3t" not in run.stderr
