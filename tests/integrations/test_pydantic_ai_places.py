"""Where todo_write_toolset records: owners= a directory or a postgresql:// URL, and with
neither session= nor owners=, the place DSH_TODO_HOME names (read when the toolset is built).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from psycopg.conninfo import conninfo_to_dict
from pydantic_ai import Agent, RunContext
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.toolsets import FunctionToolset

from dsh_tool_todo.core.contract import NO_OWNER
from dsh_tool_todo.errors import UsageError
from dsh_tool_todo.integrations.pydantic_ai import linked_toolset, todo_write_toolset
from dsh_tool_todo.stores import postgres
from dsh_tool_todo.stores.jsonl import JsonlSession, current_plan, read_events
from dsh_tool_todo.stores.memory import MemorySession
from dsh_tool_todo.stores.owners import OwnerRegistry, owner_file_name
from tests._builders import PLAN_A, PLAN_B, plan, todo, written_plans
from tests.integrations.scripted_pydantic_ai import Script, replying
from tests.integrations.test_sub_agents import call, planning_agent, said
from tests.stores.conftest import fresh_database

pytestmark = pytest.mark.usefixtures("no_model_requests")


def run(script: Script, deps: Any, toolset: Any = None, **options: Any) -> Any:
    if toolset is None:
        toolset = todo_write_toolset(allow_parallel_in_progress=False, **options)
    return asyncio.run(Agent(FunctionModel(script), toolsets=[toolset]).run("go", deps=deps))


def logs(directory: Path) -> list[str]:
    return sorted(path.name for path in directory.iterdir())


def home(monkeypatch: pytest.MonkeyPatch, place: Path) -> Path:
    monkeypatch.setenv("DSH_TODO_HOME", str(place))
    return place


# --- owners= a directory, a URL ------------------------------------------------------------


@pytest.mark.parametrize("as_text", [False, True], ids=["path", "str"])
def test_owners_a_directory_records_one_log_per_owner_key(tmp_path: Path, as_text: bool) -> None:
    place = tmp_path / "plans"  # made on first use
    toolset = todo_write_toolset(
        allow_parallel_in_progress=False, owners=str(place) if as_text else place
    )
    run(Script({"todos": PLAN_A}), "ada@example.com", toolset)
    run(Script({"todos": PLAN_B}), "bob", toolset)
    assert logs(place) == ["ada%40example.com.jsonl", "bob.jsonl"]
    assert current_plan(place / "ada%40example.com.jsonl") == PLAN_A
    assert current_plan(place / "bob.jsonl") == PLAN_B


def test_owners_a_directory_expands_the_home_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    run(Script({"todos": PLAN_A}), "ada", owners="~/plans")
    assert current_plan(tmp_path / "plans" / "ada.jsonl") == PLAN_A


def test_the_logs_a_toolset_opened_are_closed_when_no_run_uses_it(tmp_path: Path) -> None:
    toolset = todo_write_toolset(allow_parallel_in_progress=False, owners=tmp_path)
    run(Script({"todos": PLAN_A}), "ada", toolset)
    # the one-writer lock is free: another writer (another process) may open the log
    JsonlSession(tmp_path / "ada.jsonl").close()
    run(Script({"todos": PLAN_B}), "ada", toolset)  # reopened, plan intact
    assert [event["data"]["todos"] for event in read_events(tmp_path / "ada.jsonl")] == [
        PLAN_A,
        PLAN_B,
    ]


def test_concurrent_runs_share_the_logs_until_the_last_one_ends(tmp_path: Path) -> None:
    toolset = todo_write_toolset(allow_parallel_in_progress=False, owners=tmp_path)
    plans = [[todo(f"Run {index}", "in_progress")] for index in range(6)]

    async def runs() -> None:
        agents = [Agent(FunctionModel(Script({"todos": plan}))) for plan in plans]
        await asyncio.gather(*(agent.run("go", deps="ada", toolsets=[toolset]) for agent in agents))

    asyncio.run(runs())
    written = [event["data"]["todos"] for event in read_events(tmp_path / "ada.jsonl")]
    assert sorted(map(str, written)) == sorted(map(str, plans))
    JsonlSession(tmp_path / "ada.jsonl").close()  # closed once the last run ended


def test_a_registry_of_the_callers_own_stays_open_after_a_run(tmp_path: Path) -> None:
    with OwnerRegistry(tmp_path) as owners:
        run(Script({"todos": PLAN_A}), "ada", owners=owners)
        assert owners.owners() == ["ada"]  # the caller closes it, when the caller decides


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A new database set up as `dsh-todo db init` sets one up, named by a postgresql:// URL."""
    with fresh_database() as conninfo:
        postgres.setup(conninfo)
        yield "postgresql://?" + urlencode(conninfo_to_dict(conninfo))


@pytest.mark.postgres
def test_owners_a_postgresql_url_records_one_session_per_owner_key(pg_url: str) -> None:
    toolset = todo_write_toolset(allow_parallel_in_progress=False, owners=pg_url)
    run(Script({"todos": PLAN_A}), "ada", toolset)
    run(Script({"todos": PLAN_B}), "bob", toolset)
    assert postgres.current_plan(pg_url, "ada") == PLAN_A
    assert postgres.current_plan(pg_url, "bob") == PLAN_B


@pytest.mark.postgres
def test_the_variable_may_name_a_database(pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DSH_TODO_HOME", pg_url)
    run(Script({"todos": PLAN_A}), None)
    assert postgres.current_plan(pg_url, "default") == PLAN_A


@pytest.mark.parametrize(
    ("owners", "wanted"),
    [
        ("", r"^todo_write_toolset: owners= is empty: name a directory"),
        (42, r"^todo_write_toolset: owners= takes where the plans are kept: .* not int 42"),
        (OwnerRegistry, r"the class OwnerRegistry itself \(pass an instance\)"),
        ("~nobody-here/plans", r"'~nobody-here/plans' starts with ~"),
    ],
    ids=["empty", "an-int", "the-class", "an-unknown-user"],
)
def test_a_bad_owners_is_refused_when_the_toolset_is_built(owners: Any, wanted: str) -> None:
    with pytest.raises(UsageError, match=wanted):
        todo_write_toolset(allow_parallel_in_progress=False, owners=owners)


# --- DSH_TODO_HOME ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("deps", "key"), [("ada", "ada"), (None, "default"), ({"user": "ada"}, "default")]
)
def test_the_variable_records_a_run_without_a_session_under_its_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, deps: Any, key: str
) -> None:
    place = home(monkeypatch, tmp_path)
    script = Script({"todos": PLAN_A})
    run(script, deps)
    assert logs(place) == [owner_file_name(key)]
    assert current_plan(place / f"{key}.jsonl") == PLAN_A
    (answer,) = script.returns()
    assert answer.outcome == "success"


def test_with_the_variable_a_session_in_the_deps_still_owns_the_plan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    place = home(monkeypatch, tmp_path)
    session = MemorySession()
    run(Script({"todos": PLAN_A}), session)

    class Deps:
        session = MemorySession()

    run(Script({"todos": PLAN_B}), Deps())
    assert written_plans(session) == [PLAN_A]
    assert written_plans(Deps.session) == [PLAN_B]
    assert logs(place) == []


def test_the_variable_is_read_when_the_toolset_is_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = home(monkeypatch, tmp_path / "first")
    toolset = todo_write_toolset(allow_parallel_in_progress=False)
    home(monkeypatch, tmp_path / "second")
    run(Script({"todos": PLAN_A}), "ada", toolset)
    assert logs(tmp_path) == ["first"]
    assert current_plan(first / "ada.jsonl") == PLAN_A
    monkeypatch.delenv("DSH_TODO_HOME")
    run(Script({"todos": PLAN_B}), "ada", toolset)
    assert current_plan(first / "ada.jsonl") == PLAN_B


def test_a_session_function_or_owners_take_the_place_of_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    place = home(monkeypatch, tmp_path / "home")
    session = MemorySession()
    run(Script({"todos": PLAN_A}), "ada", session=lambda ctx: session)
    run(Script({"todos": PLAN_B}), "ada", owners=tmp_path / "mine")
    assert written_plans(session) == [PLAN_A]
    assert current_plan(tmp_path / "mine" / "ada.jsonl") == PLAN_B
    assert not place.exists()


@pytest.mark.parametrize("deps", [None, "ada"])
def test_without_the_variable_a_run_without_a_session_is_refused_as_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, deps: Any
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DSH_TODO_HOME", raising=False)
    toolset = todo_write_toolset(allow_parallel_in_progress=False)
    scripts = [Script({"todos": PLAN_A}), Script({"todos": PLAN_B})]
    with caplog.at_level(logging.WARNING, logger="dsh_tool_todo"):
        for script in scripts:
            run(script, deps, toolset)
    assert [(part.content, part.outcome) for s in scripts for part in s.returns()] == [
        (NO_OWNER, "failed")
    ] * 2
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "found no owner" in warnings[0].getMessage()
    assert "DSH_TODO_HOME" in warnings[0].getMessage()
    assert logs(tmp_path) == []


@pytest.mark.parametrize("value", ["", "   "])
def test_an_empty_variable_is_no_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DSH_TODO_HOME", value)
    script = Script({"todos": PLAN_A})
    run(script, "ada")
    assert [part.content for part in script.returns()] == [NO_OWNER]
    assert logs(tmp_path) == []


# --- sub-agents in the variable's place -------------------------------------------------------


def research_lead() -> Any:
    """A lead whose linked tool ``research`` runs a researcher; both record through one toolset
    built with no owners=, so in the place the variable names."""
    todo = todo_write_toolset(allow_parallel_in_progress=False)
    researcher = planning_agent("researcher", todo, "Search", "r1", "found")

    async def research(ctx: RunContext[Any], question: str) -> str:
        return (await researcher.run(question, deps=ctx.deps, usage=ctx.usage)).output

    model = replying(
        call("todo_write", plan("Delegate", status="in_progress"), "l1"),
        call("research", {"question": "q"}, "l2"),
        said("done"),
    )
    return Agent(model, name="lead", toolsets=[todo, linked_toolset(FunctionToolset([research]))])


@pytest.mark.parametrize(("deps", "key"), [("ada", "ada"), (None, "default")])
def test_a_sub_agent_records_under_its_own_linked_key_in_the_variables_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, deps: Any, key: str
) -> None:
    place = home(monkeypatch, tmp_path)
    assert asyncio.run(research_lead().run("go", deps=deps)).output == "done"
    child = owner_file_name(f"{key}/researcher@l2")
    assert logs(place) == sorted([f"{key}.jsonl", child])
    assert current_plan(place / f"{key}.jsonl") == plan("Delegate", status="in_progress")["todos"]
    assert current_plan(place / child) == plan("Search", status="in_progress")["todos"]
    assert read_events(place / child)[0]["data"] == {"parent": key, "parentCallId": "l2"}
