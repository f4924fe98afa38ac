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
import re
import shlex
import signal
import subprocess
import time
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
PAGE = Path(__file__).resolve().parents[2] / "docs" / "integrations" / "durable.md"
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


# --- the page's recipe, as printed ----------------------------------------------------------

PAGE_MODEL = '"openai:gpt-5.2"'
PAGE_STORE = "postgresql://127.0.0.1/app"
PAGE_SYSTEM_DB = "postgresql://127.0.0.1/app_dbos"
PAGE_SESSION = "agent-7"


def page_recipe() -> tuple[str, list[list[str]]]:
    """The page's Python block, and the commands of its shell block (comments dropped)."""
    text = PAGE.read_text(encoding="utf-8")
    (code,) = re.findall(r"^```py\n(.*?)^```", text, re.S | re.M)
    (shell,) = re.findall(r"^```sh\n(.*?)^```", text, re.S | re.M)
    commands = [shlex.split(line, comments=True) for line in shell.splitlines() if line.strip()]
    return code, commands


def page_script(code: str, store: str, system_db: str) -> str:
    """The page's code on this test's databases, with the scripted model for the real one."""
    for printed in (PAGE_MODEL, f'"{PAGE_SYSTEM_DB}"', f'"{PAGE_STORE}"'):
        assert code.count(printed) == 1, f"the page's code no longer holds {printed} once"
    code = code.replace(f'"{PAGE_SYSTEM_DB}"', repr(system_db))
    code = code.replace(f'"{PAGE_STORE}"', repr(store))
    prelude = (
        f"import sys\nsys.path.insert(0, {str(Path(__file__).parent)!r})\n"
        "from dbos_page_model import MODEL\n"
    )
    return prelude + code.replace(PAGE_MODEL, "MODEL")


def page_command(words: list[str], script: Path, store: str) -> list[str]:
    """A printed command, run with this test's interpreter, script and store."""
    if words[0] == "dsh-todo":
        return [
            sys.executable,
            "-m",
            "dsh_tool_todo",
            *(store if w == PAGE_STORE else w for w in words[1:]),
        ]
    assert words[:2] == ["python", "agent.py"], words
    return [sys.executable, str(script), *words[2:]]


def writes_in(dsn: str) -> int:
    return sum(event["type"] == EVENT_TYPE for event in postgres_events(dsn, PAGE_SESSION))


def test_the_pages_recipe_resumes_a_run_killed_with_kill_9(system_db: str, tmp_path: Path) -> None:
    code, (init, run, recover) = page_recipe()
    assert init[:3] == ["dsh-todo", "db", "init"], "the page sets up the table first"
    assert recover == [*run, "--recover"], "the recovery names the run's workflow id"
    env = dict(os.environ, DBOS__LOGLEVEL="WARNING", PYTHONWARNINGS="error")
    with fresh_database() as dsn:
        store = database_dsn_url(psycopg.conninfo.conninfo_to_dict(dsn)["dbname"])
        script = tmp_path / "agent.py"
        script.write_text(page_script(code, store, system_db), encoding="utf-8")
        setup = subprocess.run(
            page_command(init, script, store), capture_output=True, text=True, timeout=CYCLE_TIMEOUT
        )
        assert setup.returncode == 0, setup.stderr

        # the run: killed from outside while its third model step is in flight
        first = subprocess.Popen(
            page_command(run, script, store),
            env=dict(env, DSH_TODO_TEST_HOLD_AT="2"),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            deadline = time.monotonic() + CYCLE_TIMEOUT
            while writes_in(dsn) < 2:
                assert first.poll() is None, first.communicate()[1][-3000:]
                assert time.monotonic() < deadline, "the run recorded no two plans in time"
                time.sleep(0.05)
            os.kill(first.pid, signal.SIGKILL)
            assert first.wait(timeout=CYCLE_TIMEOUT) == -signal.SIGKILL
        finally:
            first.kill()
            first.communicate()
        assert writes_in(dsn) == 2

        second = subprocess.run(
            page_command(recover, script, store),
            env=env,
            capture_output=True,
            text=True,
            timeout=CYCLE_TIMEOUT,
        )
        assert second.returncode == 0, second.stderr[-3000:]
        assert second.stdout.splitlines()[-1] == "Done."  # the resumed run's own result
        assert_one_snapshot_per_call(postgres_events(dsn, PAGE_SESSION))
