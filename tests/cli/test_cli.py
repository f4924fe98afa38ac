"""The dsh-todo command line, through a real subprocess as a user runs it."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import sysconfig
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from dsh_tool_todo import replay
from dsh_tool_todo.core.contract import EVENT_TYPE
from dsh_tool_todo.core.definition import definition_json
from dsh_tool_todo.host import Host
from dsh_tool_todo.stores.jsonl import JsonlSession, read_events
from tests.conftest import options

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONIOENCODING": "utf-8"}


def dsh_todo(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    run = subprocess.run(
        [sys.executable, "-m", "dsh_tool_todo", *args],
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=ENV,
        timeout=60,
    )
    if check:
        assert run.returncode == 0, run.stderr
    return run


def assert_usage_error(run: subprocess.CompletedProcess[str], pattern: str) -> None:
    assert run.returncode == 2
    assert run.stdout == ""
    lines = run.stderr.splitlines()
    assert len(lines) == 1, run.stderr
    assert lines[0].startswith("dsh-todo")
    assert "Traceback" not in run.stderr
    assert re.search(pattern, lines[0]), lines[0]


@pytest.fixture(scope="module")
def demo_log(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    log = tmp_path_factory.mktemp("demo") / "session.jsonl"
    return log, dsh_todo("demo", "--log", str(log)).stdout


def test_demo_plays_a_whole_session(demo_log: tuple[Path, str]) -> None:
    log, out = demo_log
    assert "=== turn 1" in out
    assert "=== turn 2" in out
    assert "tool  → Updated todo list: 3 pending, 1 in progress, 0 completed." in out
    assert "tool  → Error: invalid todos: at most one task may be in_progress (got 2)" in out
    assert "tool  → Error: invalid todo at index 0: `status` must be one of" in out
    assert f"session log: {log}\nnext: " in out
    events = read_events(log)
    assert [e["type"] for e in events].count("turn/start") == 2
    assert sum(e["type"] == EVENT_TYPE for e in events) == out.count("tool  → Updated")


def test_show_prints_the_demo_final_plan(demo_log: tuple[Path, str]) -> None:
    log, out = demo_log
    shown = dsh_todo("show", str(log)).stdout
    assert "Pass --json there" in shown
    drawn = "\n".join(f"    {line}" for line in shown.splitlines())
    assert out.rindex(drawn) > out.rindex("=== turn 2"), "the last checklist the demo drew"
    assert out.rindex(drawn) > out.rindex("model →")


def test_show_formats(demo_log: tuple[Path, str]) -> None:
    log, _ = demo_log
    plan = replay(read_events(log))
    assert json.loads(dsh_todo("show", str(log), "--format", "json").stdout) == plan
    acp = json.loads(dsh_todo("show", str(log), "--format", "acp").stdout)
    assert acp["sessionUpdate"] == "plan"
    assert [entry["content"] for entry in acp["entries"]] == [item["content"] for item in plan]
    ascii_text = dsh_todo("show", str(log), "--ascii").stdout
    assert "[x] Pass --json there" in ascii_text


def test_demo_with_parallel_work_accepts_two_active_tasks(tmp_path: Path) -> None:
    out = dsh_todo("demo", "--parallel", "--log", str(tmp_path / "p.jsonl")).stdout
    assert "at most one task" not in out
    assert "tool  → Updated todo list: 1 pending, 2 in progress, 1 completed." in out


def test_demo_refuses_to_overwrite_a_log(tmp_path: Path) -> None:
    log = tmp_path / "taken.jsonl"
    log.write_text("")
    assert_usage_error(dsh_todo("demo", "--log", str(log), check=False), "already exists")


def test_show_a_missing_file(tmp_path: Path) -> None:
    run = dsh_todo("show", str(tmp_path / "nope.jsonl"), check=False)
    assert_usage_error(run, "nope.jsonl: no such session log")


def test_show_a_file_that_is_not_a_session_log(tmp_path: Path) -> None:
    not_a_log = tmp_path / "notes.txt"
    not_a_log.write_text("shopping list\nmilk\n")
    assert_usage_error(dsh_todo("show", str(not_a_log), check=False), "notes.txt")


@pytest.mark.parametrize(
    ("args", "pattern"),
    [
        (["show", "--format", "yaml"], "invalid choice: 'yaml'"),
        (["schema", "--format", "yaml"], "invalid choice: 'yaml'"),
        (["demo", "--fast"], "unrecognized arguments: --fast"),
    ],
)
def test_bad_flags_get_one_line_and_exit_2(args: list[str], pattern: str) -> None:
    assert_usage_error(dsh_todo(*args, check=False), pattern)


@pytest.mark.parametrize("flavor", ["json", "openai", "anthropic"])
@pytest.mark.parametrize("parallel", [False, True])
def test_schema_is_the_definition_the_model_sees(flavor: str, parallel: bool) -> None:
    args = ["schema", "--format", flavor, *(["--parallel"] if parallel else [])]
    first, second = dsh_todo(*args).stdout, dsh_todo(*args).stdout
    assert first == second
    tool = Host([__import__("dsh_tool_todo")], options(parallel)).tools["todo_write"]
    assert first == definition_json(tool, flavor) + "\n"  # type: ignore[arg-type]


@pytest.mark.parametrize("parallel", [False, True])
def test_schema_format_openai_is_what_a_strict_mode_request_carries(parallel: bool) -> None:
    """The OpenAI Agents SDK's Chat Completions request for our function tool, as printed."""
    from agents.models.chatcmpl_converter import Converter

    from dsh_tool_todo.integrations.openai_agents import todo_write_function_tool

    printed = json.loads(
        dsh_todo("schema", "--format", "openai", *(["--parallel"] if parallel else [])).stdout
    )
    tool = todo_write_function_tool(allow_parallel_in_progress=parallel, owner="main")
    assert printed["function"]["strict"] is True
    assert printed == Converter.tool_to_openai(tool)


def test_schema_snapshot() -> None:
    assert dsh_todo("schema").stdout == (ROOT / "tests/snapshots/schema.json").read_text(
        encoding="utf-8"
    )


def test_help_everywhere() -> None:
    for command in ([], ["demo"], ["show"], ["watch"], ["schema"]):
        assert "usage: dsh-todo" in dsh_todo(*command, "--help").stdout


def test_the_reference_in_the_docs_is_current() -> None:
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import cli_reference
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    page = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    assert page == cli_reference.updated(page), "run: python scripts/cli_reference.py"
    assert "dsh-todo watch --help" in page


def start_watch(*args: str) -> subprocess.Popen[str]:
    """``dsh-todo watch ARGS --ascii``, polling every 0.05 s, its output piped."""
    command = [sys.executable, "-m", "dsh_tool_todo", "watch", *args, "--ascii"]
    return subprocess.Popen(
        [*command, "--interval", "0.05"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        encoding="utf-8",
        env=ENV,
    )


def lines_until(watcher: subprocess.Popen[str], wanted: str) -> list[str]:
    """The lines ``watcher`` prints until one is ``wanted`` (or 30 s pass)."""
    assert watcher.stdout is not None
    seen: list[str] = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and wanted not in seen:
        seen.append(watcher.stdout.readline().strip())
    return seen


def lines_while_a_writer_appends(watcher: subprocess.Popen[str], log: Path) -> list[str]:
    """Another process writes ``Index`` in progress and, once ``watcher`` has shown it,
    completed; the lines ``watcher`` prints meanwhile."""
    seen: list[str] = []
    for status, shown in (("in_progress", "[>] Index"), ("completed", "[x] Index")):
        subprocess.run(
            [sys.executable, "-c", WRITER, str(log), status], check=True, env=ENV, timeout=60
        )
        seen += lines_until(watcher, shown)
    return seen


def test_watch_follows_a_log_another_process_appends_to(tmp_path: Path) -> None:
    log = tmp_path / "live.jsonl"
    with JsonlSession(log) as session:
        session.append("turn/start", {})
    with start_watch(str(log)) as watcher:
        assert watcher.stdout is not None
        assert watcher.stderr is not None
        try:
            assert watcher.stdout.readline().strip() == str(log)
            assert watcher.stdout.readline().strip() == "No plan."
            seen = lines_while_a_writer_appends(watcher, log)
            assert "[>] Index" in seen
            assert "[x] Index" in seen
            watcher.send_signal(signal.SIGINT)
            assert watcher.wait(timeout=30) == 0
            assert "Traceback" not in watcher.stderr.read()
        finally:
            watcher.kill()


CTRL_C_IN_GENERATED_CODE = """
import sys
from dsh_tool_todo import cli

def interrupted(args, out):
    def stop():
        raise KeyboardInterrupt
    eval("stop()", {"stop": stop})  # escapes an eval of a string, as from a class being made

cli._COMMANDS["watch"] = interrupted
raise SystemExit(cli.main(["watch", sys.argv[1]]))
"""


def test_ctrl_c_ends_the_command_with_status_0_even_inside_code_run_from_a_string(
    tmp_path: Path,
) -> None:
    # run as `python -m`, as the command's other tests run it: that path checks the flag
    (tmp_path / "interrupted_cli.py").write_text(CTRL_C_IN_GENERATED_CODE, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "interrupted_cli", str(tmp_path / "log.jsonl")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=ENV,
        timeout=60,
    )
    assert (done.returncode, done.stderr) == (0, "")


WRITER = """
import sys
from dsh_tool_todo.stores.jsonl import JsonlSession

with JsonlSession(sys.argv[1]) as session:
    session.append("todo/write", {"todos": [{"content": "Index", "status": sys.argv[2]}]})
"""


def test_show_a_torn_log_warns_in_one_line_and_keeps_the_whole_events(tmp_path: Path) -> None:
    log = tmp_path / "torn.jsonl"
    with JsonlSession(log) as session:
        session.append(EVENT_TYPE, {"todos": [{"content": "Kept", "status": "in_progress"}]})
    whole = log.stat().st_size
    with log.open("ab") as file:
        file.write(b'{"seq":1,"type":"todo/wr')
    run = dsh_todo("show", str(log), "--ascii")
    assert run.stdout.splitlines()[0] == "[>] Kept"
    assert run.stderr.splitlines() == [
        f"dsh-todo: warning: {log}: torn last line at byte {whole} ignored (a write was cut short)"
    ]


def test_show_ascii_prints_only_ascii(tmp_path: Path) -> None:
    log = tmp_path / "accents.jsonl"
    with JsonlSession(log) as session:
        todos = [{"content": "Réécrire l’analyseur → v2", "status": "in_progress"}]
        session.append(EVENT_TYPE, {"todos": todos})
    out = dsh_todo("show", str(log), "--ascii").stdout
    assert out.isascii()
    assert out.splitlines()[0] == "[>] R\\u00e9\\u00e9crire l\\u2019analyseur \\u2192 v2"
    assert dsh_todo("show", str(log)).stdout.splitlines()[0] == "► Réécrire l’analyseur → v2"


def test_watch_help_states_the_smallest_interval() -> None:
    assert "at least 0.05" in dsh_todo("watch", "--help").stdout


def test_the_demo_names_its_next_step_in_a_form_a_shell_takes(tmp_path: Path) -> None:
    """Run as a new user does, ``.venv/bin/dsh-todo demo`` with the environment not on PATH:
    the printed commands run as printed, in a shell whose PATH lacks the environment."""
    log = tmp_path / "with space" / "it's.jsonl"
    log.parent.mkdir()
    script = Path(sysconfig.get_path("scripts")) / "dsh-todo"
    bare = {**ENV, "PATH": "/usr/bin:/bin"}

    out = subprocess.run(
        [script, "demo", "--log", str(log)], capture_output=True, text=True, env=bare, check=True
    ).stdout
    hint = out.rstrip().splitlines()[-1].removeprefix("next: ")
    show, _, serve = hint.partition("    (or: ")
    shown = subprocess.run(
        show, shell=True, capture_output=True, text=True, env=bare, check=False, cwd=tmp_path
    )

    assert shown.returncode == 0, shown.stderr
    assert shown.stdout == dsh_todo("show", str(log)).stdout
    # dev installs the web extra: serve is offered, by the same absolute path
    assert serve == f"{shlex.quote(str(script))} serve {shlex.quote(str(log.parent))})"


def test_the_demo_says_dsh_todo_when_path_finds_this_one(tmp_path: Path) -> None:
    log = tmp_path / "session.jsonl"
    script = Path(sysconfig.get_path("scripts")) / "dsh-todo"
    path = {**ENV, "PATH": f"{script.parent}{os.pathsep}/usr/bin:/bin"}

    out = subprocess.run(
        [script, "demo", "--log", str(log)], capture_output=True, text=True, env=path, check=True
    ).stdout

    assert out.rstrip().splitlines()[-1].startswith(f"next: dsh-todo show {log}    (or: ")


def test_the_demo_offers_serve_only_with_the_web_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import importlib.util

    from dsh_tool_todo import cli

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *rest: None if name == "starlette" else find_spec(name, *rest),
    )

    assert cli.main(["demo", "--log", str(tmp_path / "session.jsonl")]) == 0

    hint = capsys.readouterr().out.rstrip().splitlines()[-1]
    assert hint.startswith("next: ")
    assert "(or:" not in hint


def test_watch_wait_waits_for_a_log_that_does_not_exist_yet(tmp_path: Path) -> None:
    log = tmp_path / "later.jsonl"
    with start_watch(str(log), "--wait") as watcher:
        assert watcher.stdout is not None
        assert watcher.stderr is not None
        try:
            assert watcher.stderr.readline() == (
                f"dsh-todo: waiting for {log} to appear (Ctrl-C to stop)\n"
            )
            time.sleep(0.3)
            assert watcher.poll() is None
            seen = lines_while_a_writer_appends(watcher, log)
            assert seen[0] == str(log)
            assert "[x] Index" in seen
            watcher.send_signal(signal.SIGINT)
            assert watcher.wait(timeout=30) == 0
        finally:
            watcher.kill()


def test_watch_without_wait_says_how_to_wait(tmp_path: Path) -> None:
    log = tmp_path / "later.jsonl"

    assert_usage_error(
        dsh_todo("watch", str(log), check=False),
        re.escape(
            f"{log}: no such session log (to wait for it to appear: dsh-todo watch {log} --wait)"
        ),
    )


@contextmanager
def database_to_watch() -> Iterator[tuple[str, str]]:
    """A set-up database of the test's own: its conninfo, and the URL ``dsh-todo`` is given."""
    from psycopg.conninfo import conninfo_to_dict

    from dsh_tool_todo.stores import postgres
    from tests.stores.conftest import fresh_database

    with fresh_database() as conninfo:
        postgres.setup(conninfo)
        params = conninfo_to_dict(conninfo)
        yield (
            conninfo,
            f"postgresql://{params['user']}@{params['host']}:{params['port']}/{params['dbname']}",
        )


def test_watch_wait_waits_for_a_postgresql_session_that_has_no_rows_yet() -> None:
    from dsh_tool_todo.stores import postgres

    with (
        database_to_watch() as (conninfo, url),
        start_watch(url, "--session", "later", "--wait") as watcher,
    ):
        assert watcher.stdout is not None
        assert watcher.stderr is not None
        try:
            waiting = watcher.stderr.readline()
            assert waiting.startswith("dsh-todo: waiting for session 'later' in PostgreSQL at")
            time.sleep(0.3)
            assert watcher.poll() is None
            with postgres.PostgresSession(conninfo, "later") as session:
                session.append(EVENT_TYPE, {"todos": [{"content": "Index", "status": "completed"}]})
            assert "[x] Index" in lines_until(watcher, "[x] Index")
            watcher.send_signal(signal.SIGINT)
            assert watcher.wait(timeout=30) == 0
        finally:
            watcher.kill()


def test_watch_wait_stopped_with_ctrl_c_while_waiting_ends_without_a_traceback() -> None:
    from tests.stores.conftest import count_listening

    with (
        database_to_watch() as (conninfo, url),
        start_watch(url, "--session", "never", "--wait") as watcher,
    ):
        assert watcher.stderr is not None
        try:
            waiting = watcher.stderr.readline()
            deadline = time.monotonic() + 30  # until its follower listens for the rows
            while count_listening(conninfo) == 0 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert count_listening(conninfo) == 1
            watcher.send_signal(signal.SIGINT)
            assert watcher.wait(timeout=30) == 0
            # the follower's read, left waiting by the Ctrl-C, was logged as lost
            assert watcher.stderr.read() == ""
            assert waiting.startswith("dsh-todo: waiting for session 'never'")
        finally:
            watcher.kill()


@pytest.mark.parametrize("command", ["sessions", "show", "watch", "serve"])
def test_an_empty_source_is_refused_not_read_as_the_current_directory(command: str) -> None:
    run = dsh_todo(command, "", check=False)
    assert_usage_error(run, r"the source is empty: .*`\.` for the current one")


def test_open_reader_refuses_an_empty_source() -> None:
    from dsh_tool_todo.errors import UsageError
    from dsh_tool_todo.stores import open_reader

    with pytest.raises(UsageError, match="the source is empty"):
        open_reader("")


def test_the_cli_package_exports_main_and_build_parser_and_loads_no_command() -> None:
    code = (
        "import sys, json, dsh_tool_todo.cli as cli; "
        "loaded = sorted(m for m in sys.modules if m.startswith(cli.__name__)); "
        "print(json.dumps([cli.__all__, loaded]))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    exported, loaded = json.loads(done.stdout)
    assert exported == ["build_parser", "main"]
    assert not {"dsh_tool_todo.cli._commands", "dsh_tool_todo.cli._plans"} & set(loaded)
    assert "dsh_tool_todo.cli._sources" not in loaded


def test_every_command_the_parser_knows_runs_a_command_function() -> None:
    import argparse
    import importlib

    from dsh_tool_todo import cli

    parser = cli.build_parser()
    (commands,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert set(commands.choices) == set(cli._COMMANDS)
    modules = [
        importlib.import_module(f"dsh_tool_todo.cli.{name}")
        for name in ("_commands", "_plans", "_requests", "_sources")
    ]
    for name in commands.choices:  # each command is one function of one command module
        assert [callable(getattr(module, name, None)) for module in modules].count(True) == 1


def test_the_demo_plays_every_scripted_call_and_records_the_session(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from dsh_tool_todo import cli
    from dsh_tool_todo.cli._demo import SCRIPT

    log = tmp_path / "session.jsonl"
    assert cli.main(["demo", "--log", str(log), "--ascii"]) == 0
    text = capsys.readouterr().out
    calls = sum(len(calls) for _prompt, calls in SCRIPT)
    assert text.count("\nmodel -> todo_write ") == calls
    assert text.count("\ntool  -> ") == calls
    assert "    [x] Pass --json there" in text
    events = read_events(log)
    assert [event["type"] for event in events].count("turn/start") == len(SCRIPT)
    # each turn but the last ends; the last is still at work, its plan in progress
    assert [event["type"] for event in events].count("turn/end") == len(SCRIPT) - 1
    assert events[-1]["type"] == EVENT_TYPE


def test_the_health_under_a_log_files_plan_is_read_without_an_event_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``watch`` redraws read the turn back for its health lines: a Ctrl-C inside an event
    loop made per redraw could leave it half closed, and Python 3.10 printed a traceback."""
    import asyncio

    from dsh_tool_todo.cli._plans import turn_signals

    log = tmp_path / "live.jsonl"
    with JsonlSession(log) as session:
        for _ in range(3):
            session.append(EVENT_TYPE, {"todos": [{"content": "Index", "status": "in_progress"}]})

    def no_loop() -> asyncio.AbstractEventLoop:
        raise AssertionError("an event loop was made")

    monkeypatch.setattr(asyncio.events, "new_event_loop", no_loop)
    assert [signal.kind for signal in turn_signals(str(log))] == ["unchanged", "unchanged"]


def test_sessions_json_written_a_root_at_a_time_is_one_json_document(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from dsh_tool_todo.cli import main

    for name in ("a", "b", "café"):
        with JsonlSession(tmp_path / f"{name}.jsonl") as session:
            session.append(EVENT_TYPE, {"todos": [{"content": name, "status": "pending"}]})
    assert main(["sessions", str(tmp_path), "--json"]) == 0
    printed = capsys.readouterr().out
    document = json.loads(printed)
    assert printed == json.dumps(document) + "\n"
    assert sorted(node["key"] for node in document["sessions"]) == ["a", "b", "café"]
