"""pydantic-ai on DBOS with our toolset: kill -9 at each point of a run, recover, count snapshots.

Each case runs tests/integrations/dbos_worker.py in a subprocess that sends itself SIGKILL at
one point of a durable agent run (four scripted ``todo_write`` calls), then a new process whose
``DBOS.launch()`` recovers the workflow. Recovery replays the checkpointed model responses and
re-executes every ``todo_write`` of the run (function tools are not DBOS steps): the stores'
call-id rule must keep the log at one snapshot per call. DBOS's system database is a database
of each case's own on the test server, dropped afterwards. Needs dbos (the ``dbos`` extra) and
PostgreSQL: the test fails, never skips, without them (on Python 3.11+: the extra needs a
pydantic-ai that Python 3.10 cannot install, and its marker leaves it out there).
"""

from __future__ import annotations

import sys

import pytest

from dsh_tool_todo.core.contract import EVENT_TYPE

if sys.version_info < (3, 11):  # pragma: no cover - the extra's marker leaves dbos out here
    pytest.skip("the dbos extra needs Python 3.11+", allow_module_level=True)

import json
import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dbos  # noqa: F401  (the extra is required: a missing package fails collection)
import psycopg

from dsh_tool_todo.stores.jsonl import read_events
from tests.integrations.dbos_plans import PLANS
from tests.stores.conftest import admin_connection, database_dsn, fresh_database

WORKER = Path(__file__).with_name("dbos_worker.py")
CYCLE_TIMEOUT = 120  # seconds for one process; a cycle takes about 10 s on this machine


@pytest.fixture
def system_db() -> Iterator[str]:
    """A database name for DBOS to create (it does, from the URL), dropped afterwards."""
    name = f"dsh_todo_dbos_{uuid.uuid4().hex[:12]}"
    try:
        yield database_dsn_url(name)
    finally:
        with admin_connection() as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def database_dsn_url(name: str) -> str:
    # DBOS takes a URL (it builds an SQLAlchemy engine), not a libpq conninfo string
    params = psycopg.conninfo.conninfo_to_dict(database_dsn(name))
    user = params.get("user", "postgres")
    host = params.get("host", "127.0.0.1")
    port = params.get("port", 5432)
    return f"postgresql://{user}@{host}:{port}/{name}"


def worker(
    mode: str, system_db: str, store: str, kill: str = "none"
) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, DBOS__LOGLEVEL="WARNING", PYTHONWARNINGS="error")
    return subprocess.run(
        [sys.executable, str(WORKER), mode, system_db, "workflow-1", store, kill],
        capture_output=True,
        text=True,
        timeout=CYCLE_TIMEOUT,
        env=env,
        check=False,
    )


def killed_then_recovered(system_db: str, store: str, kill: str) -> None:
    first = worker("run", system_db, store, kill)
    assert first.returncode == -9, f"the run was not killed at {kill}: {first.stderr[-2000:]}"
    second = worker("recover", system_db, store)
    assert second.returncode == 0, second.stderr[-3000:]
    assert json.loads(second.stdout.splitlines()[-1]) == "Done."


def assert_one_snapshot_per_call(events: list[dict[str, Any]], turns: int = 1) -> None:
    writes = [event for event in events if event["type"] == EVENT_TYPE]
    assert [event["data"].get("callId") for event in writes] == [
        f"call_{n}" for n in range(len(PLANS))
    ], "the log must hold exactly one snapshot per tool call, in call order"
    # the sequence of plans equals an uninterrupted run's: no plan went back
    assert [event["data"]["todos"] for event in writes] == PLANS
    assert [event["seq"] for event in events] == list(range(len(events)))
    assert [event["type"] for event in events] == ["turn/start"] * turns + [EVENT_TYPE] * len(PLANS)


def postgres_events(dsn: str, session_id: str) -> list[dict[str, Any]]:
    with psycopg.Connection.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT seq, type, data FROM dsh_todo_events WHERE session_id = %s ORDER BY seq",
            (session_id,),
        ).fetchall()
    return [{"seq": seq, "type": type_, "data": data} for seq, type_, data in rows]


def test_an_uninterrupted_durable_run_records_each_call_once(
    system_db: str, tmp_path: Path
) -> None:
    log = tmp_path / "agent.jsonl"
    done = worker("run", system_db, f"jsonl:{log}")
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.splitlines()[-1]) == "Done."
    assert_one_snapshot_per_call(read_events(log))


# the 3rd model step (two calls recorded), right after the 2nd call's append (its result
# not yet in a checkpointed model step), right after the last append, before the first step
KILL_POINTS = ["model:2", "append:1", "append:3", "workflow"]


@pytest.mark.parametrize("kill", KILL_POINTS)
def test_postgres_log_after_kill_9_and_recovery(system_db: str, kill: str) -> None:
    with fresh_database() as dsn:
        from dsh_tool_todo.stores import postgres

        postgres.setup(dsn)
        killed_then_recovered(system_db, f"postgres:agent-1@{dsn}", kill)
        assert_one_snapshot_per_call(postgres_events(dsn, "agent-1"))
        assert postgres.current_plan(dsn, "agent-1") == PLANS[-1]


@pytest.mark.parametrize("kill", ["model:2", "append:1"])
def test_jsonl_log_after_kill_9_and_recovery(system_db: str, tmp_path: Path, kill: str) -> None:
    log = tmp_path / "agent.jsonl"
    killed_then_recovered(system_db, f"jsonl:{log}", kill)
    assert_one_snapshot_per_call(read_events(log))


def test_a_kill_inside_the_turn_step_leaves_an_empty_turn_and_one_snapshot_per_call(
    system_db: str, tmp_path: Path
) -> None:
    # the step's append happened, its checkpoint did not: recovery runs the step again, and
    # the second turn/start comes before any call, so every call is still recorded once
    log = tmp_path / "agent.jsonl"
    killed_then_recovered(system_db, f"jsonl:{log}", "turn")
    assert_one_snapshot_per_call(read_events(log), turns=2)
