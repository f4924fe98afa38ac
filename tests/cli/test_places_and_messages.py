"""What the commands say about the places they read and write: a demo's pace and the logs a
refused demo leaves, a conninfo as the default place, the newest log picked over empty ones, a
session's symlink leading out of its directory, and names with control characters in messages.
Each test names the finding it covers and fails on the code before its fix."""

from __future__ import annotations

import json
import os
import re
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from dsh_tool_todo import cli
from dsh_tool_todo.core.contract import EVENT_TYPE
from dsh_tool_todo.stores.owners import OwnerRegistry, owner_file_name
from tests.cli.test_cli import ENV
from tests.conftest import todo

PASSWORD = "s3cretPW"


def _record(directory: Path, key: str, content: str) -> Path:
    with OwnerRegistry(directory) as owners:
        owners.session(key).append(EVENT_TYPE, {"todos": [todo(content, "in_progress")]})
    return directory / owner_file_name(key)


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    status = cli.main(list(args))
    out, err = capsys.readouterr()
    return status, out, err


def _refused(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    """The one line a command refusing ``args`` prints on stderr (status 2, nothing on stdout)."""
    status, out, err = _run(capsys, *args)
    assert (status, out) == (2, "")
    assert err.count("\n") == 1, err
    return err


def _bad_argument(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    with pytest.raises(SystemExit) as exit_:
        cli.main(list(args))
    out, err = capsys.readouterr()
    assert (exit_.value.code, out) == (2, "")
    assert err.count("\n") == 1, err
    return err


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    place = tmp_path / "home"
    monkeypatch.setenv("DSH_TODO_HOME", str(place))
    return place


# A pace past the platform's clock overflowed a sleep, and left an empty log behind.


@pytest.mark.parametrize(
    "args",
    [
        ["--pace", "1e10"],
        ["--pace", "9.3e9"],
        ["--pace", "61"],
        ["--pace", "nan"],
        ["--pace", "-1"],
        ["--serve", "--pace", "1e308"],
    ],
)
def test_a_pace_out_of_bounds_is_one_line_and_leaves_nothing(
    args: list[str], home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    err = _bad_argument(capsys, "demo", *args)
    assert "argument --pace: must be a number of seconds from 0 to 60 (got " in err
    assert not home.exists()


def test_watch_interval_past_the_clock_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    err = _bad_argument(capsys, "watch", "x.jsonl", "--interval", "1e10")
    assert "at least 0.05 and at most 3600 (got '1e10')" in err


@pytest.mark.parametrize("where", ["home", "log"])
def test_a_demo_that_fails_before_writing_leaves_no_empty_log(
    where: str, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    from dsh_tool_todo.cli import _demo

    def failing(seconds: float) -> Any:
        def go_on() -> bool:
            raise OSError("the clock is gone")

        return go_on

    monkeypatch.setattr(_demo, "paced", failing)
    log = tmp_path / "elsewhere" / "demo.jsonl"
    args = ["--log", str(log)] if where == "log" else []

    assert "the clock is gone" in _refused(capsys, "demo", "--pace", "1", *args)
    assert not log.exists()
    assert list(home.iterdir()) == [] if home.exists() else True


def test_a_demo_served_and_stopped_before_its_first_step_leaves_no_empty_log(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("uvicorn")
    from dsh_tool_todo.cli import _demo_serve

    def stopped_at_once(server: Any, listener: socket.socket, player: Any) -> None:
        return None  # Ctrl-C before the player's first step

    monkeypatch.setattr(_demo_serve, "_serve_beside", stopped_at_once)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]

    status, out, _ = _run(capsys, "demo", "--serve", "--port", str(port))

    assert status == 0
    assert "The demo plays into" in out
    assert list(home.iterdir()) == []


# A conninfo as the default place was read as a directory, its password printed.

CONNINFO = f"host=127.0.0.1 port=1 user=postgres password={PASSWORD} dbname=x"


@pytest.mark.parametrize("command", [["sessions"], ["show"], ["watch"], ["show", "--session", "a"]])
def test_a_conninfo_home_is_a_database_named_without_its_password(
    command: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("psycopg")
    monkeypatch.setenv("DSH_TODO_HOME", CONNINFO)

    err = _refused(capsys, *command)

    assert PASSWORD not in err
    assert err.startswith("dsh-todo: error: PostgreSQL at 127.0.0.1:1/x: ")


@pytest.mark.parametrize(
    ("command", "said"),
    [
        (["demo"], "DSH_TODO_HOME names a database, and the demo writes a JSONL log file"),
        (["mcp"], "DSH_TODO_HOME names a PostgreSQL database, and dsh-todo mcp records to"),
    ],
)
def test_a_conninfo_home_is_refused_as_a_database_by_what_writes_files(
    command: list[str],
    said: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DSH_TODO_HOME", CONNINFO)

    err = _refused(capsys, *command)

    assert said in err
    assert PASSWORD not in err
    assert list(tmp_path.iterdir()) == []  # no directory named after the conninfo


# The newest-log pick took an empty log a writer made and never wrote.


def test_the_newest_pick_skips_a_log_with_no_event(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    planned = _record(tmp_path, "agent", "Ship it")
    empty = tmp_path / "mcp-20991231-235959-1.jsonl"
    empty.touch()
    os.utime(planned, (1, 1))  # the empty log is the newer by far

    status, out, err = _run(capsys, "show", str(tmp_path), "--ascii")

    assert (status, out.splitlines()[0]) == (0, "[>] Ship it")
    assert (
        err == f"dsh-todo: showing {planned}, the most recently written (--session picks another)\n"
    )


def test_with_only_empty_logs_the_newest_is_shown_empty(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "mcp-1.jsonl").touch()
    status, out, _ = _run(capsys, "show", str(tmp_path), "--format", "json")
    assert (status, out) == (0, "null\n")


# A control character in a path cut the message at it, or broke a line of output.


def test_a_newline_in_the_default_place_is_escaped_not_cut(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    place = tmp_path / "new\nline"
    monkeypatch.setenv("DSH_TODO_HOME", str(place))

    err = _refused(capsys, "sessions")

    assert err.startswith(f"dsh-todo: error: the default place {tmp_path}/new\\nline ")
    assert "(DSH_TODO_HOME) does not exist yet: no plans were recorded there." in err


def test_prune_and_sessions_print_a_name_with_a_newline_on_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    place = tmp_path / "new\nline\x1b[2J"
    place.mkdir()
    escaped = f"{tmp_path}/new\\nline\\x1b[2J"

    status, out, _ = _run(capsys, "sessions", str(place), "--prune", "--older-than", "1")
    assert (status, out) == (0, f"no session in {escaped} was last written over 1 day ago\n")
    status, out, _ = _run(capsys, "sessions", str(place))
    assert (status, out) == (0, f"no sessions in {escaped}\n")


def test_prune_names_each_old_log_it_left_and_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from dsh_tool_todo.stores.jsonl import JsonlSession

    for key in ("stale", "held"):
        log = _record(tmp_path, key, key)
        os.utime(log, (time.time() - 10 * 86400, time.time() - 10 * 86400))
    (tmp_path / "dir.jsonl").mkdir()
    os.utime(tmp_path / "dir.jsonl", (time.time() - 10 * 86400, time.time() - 10 * 86400))
    written = r"\(last written 20[-\d]+T[:\d]+\+00:00\)"

    status, out, _ = _run(
        capsys, "sessions", str(tmp_path), "--prune", "--older-than", "1", "--dry-run"
    )
    assert status == 0
    assert re.fullmatch(
        rf"would leave session 'dir' {written}: not a regular file", out.splitlines()[2]
    )
    with JsonlSession(tmp_path / owner_file_name("held")):  # a writer holds it open
        status, out, _ = _run(capsys, "sessions", str(tmp_path), "--prune", "--older-than", "1")
    lines = out.splitlines()
    assert status == 0
    assert re.fullmatch(rf"deleted session 'stale' {written}", lines[0])
    assert re.fullmatch(rf"left session 'dir' {written}: not a regular file", lines[1])
    assert re.fullmatch(rf"left session 'held' {written}: a writer holds it open", lines[2])
    assert lines[3] == (
        f"deleted 1 session last written over 1 day ago in {tmp_path}; 2 left, named above"
    )


# A path the system refused was its raw error ([Errno 20] ...), saying nothing of what to do.


def test_a_path_the_system_refuses_is_one_line_naming_it_and_what_to_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = _record(tmp_path, "agent", "A")
    for command in ("show", "watch"):
        err = _refused(capsys, command, str(log / "x.jsonl"))
        assert err == (
            f"dsh-todo: error: {log}/x.jsonl: a file stands where this path needs a directory: "
            "name a directory of logs\n"
        )


# `db init ""` set up libpq's default database, whichever that was.


@pytest.mark.parametrize("dsn", ["", "  "])
def test_db_init_refuses_an_empty_database(
    dsn: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PGHOST", "127.0.0.1")  # were it read as the default: a port with no server
    monkeypatch.setenv("PGPORT", "1")
    err = _refused(capsys, "db", "init", dsn)
    assert err == (
        "dsh-todo: error: the database is empty: give a postgresql:// URL or a libpq conninfo "
        "(`postgresql://` alone names libpq's default database)\n"
    )


def test_an_error_naming_a_file_with_a_newline_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "a\nb.jsonl"
    log.write_text("not an event\n")
    err = _refused(capsys, "show", str(log))
    assert err.startswith(f"dsh-todo: error: {tmp_path}/a\\nb.jsonl, line 1: ")


# `show --session KEY` read a symlink leading out of the directory.


def test_a_session_log_that_links_outside_the_directory_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    logs, outside = tmp_path / "logs", tmp_path / "outside"
    logs.mkdir()
    secret = _record(outside, "secret", "Not yours")
    (logs / "pw.jsonl").symlink_to(secret)

    for command in (["show"], ["show", "--format", "json"], ["watch"]):
        err = _refused(capsys, *command, str(logs), "--session", "pw")
        assert err == (
            f"dsh-todo: error: {logs / 'pw.jsonl'} is a symlink leading outside {logs}: refused "
            "as the log of session 'pw', as `dsh-todo sessions` and `serve` refuse it\n"
        )


def test_a_symlink_within_the_directory_is_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kept = _record(tmp_path, "kept", "Mine")
    (tmp_path / "alias.jsonl").symlink_to(kept.name)
    status, out, _ = _run(capsys, "show", str(tmp_path), "--session", "alias", "--ascii")
    assert (status, out.splitlines()[0]) == (0, "[>] Mine")


# Hints and messages that named the wrong thing, or no place at all.


def test_the_watch_hint_keeps_the_source_and_session(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    err = _refused(capsys, "watch", str(tmp_path), "--session", "ada lovelace")
    assert err.endswith(
        f"(to wait for it to appear: dsh-todo watch {tmp_path} --session 'ada lovelace' --wait)\n"
    )


@pytest.mark.parametrize("command", [["show"], ["watch"], ["sessions"], ["serve"]])
@pytest.mark.parametrize("kind", ["file", "dangling"])
def test_a_default_place_that_is_no_directory_is_said_to_be_dsh_todo_homes(
    command: list[str],
    kind: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    place = tmp_path / "place"
    if kind == "file":
        place.write_text("x\n")
        what = "not a directory"
    else:
        place.symlink_to(tmp_path / "gone")
        what = f"a symlink to {tmp_path / 'gone'}, which does not exist"
    monkeypatch.setenv("DSH_TODO_HOME", str(place))

    err = _refused(capsys, *command)

    assert err == (
        f"dsh-todo: error: the default place {place} (DSH_TODO_HOME) is {what}: plans are kept "
        "in a directory of logs; point DSH_TODO_HOME at one, or name a SOURCE\n"
    )


def test_a_default_place_that_cannot_be_made_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "file").write_text("x\n")
    place = tmp_path / "file" / "sub"
    monkeypatch.setenv("DSH_TODO_HOME", str(place))

    err = _refused(capsys, "demo")

    assert err == (
        f"dsh-todo: error: the default place {place} (DSH_TODO_HOME) cannot be made: Not a "
        "directory; point DSH_TODO_HOME at a directory, or pass --log PATH (a new file)\n"
    )


# Through the command: `cp` of a log as long over the one `watch` follows.


def _shows(watcher: subprocess.Popen[bytes], wanted: str, within: float = 30) -> bool:
    """Whether ``watcher`` prints the line ``wanted`` within ``within`` seconds (a watch that
    keeps the old plan prints nothing more: never a wait without an end)."""
    assert watcher.stdout is not None
    deadline = time.monotonic() + within
    pending = b""
    with selectors.DefaultSelector() as selector:
        selector.register(watcher.stdout, selectors.EVENT_READ)
        while (left := deadline - time.monotonic()) > 0:
            if not selector.select(timeout=left):
                continue
            chunk = os.read(watcher.stdout.fileno(), 65536)
            if not chunk:
                return False
            *lines, pending = (pending + chunk).split(b"\n")
            if wanted.encode() in [line.strip() for line in lines]:
                return True
    return False


def test_watch_redraws_a_log_rewritten_in_place_at_the_same_size(tmp_path: Path) -> None:
    def log_text(label: str) -> str:
        lines = [
            {"seq": 0, "type": "turn/start", "data": {"prompt": "p"}},
            {"seq": 1, "type": EVENT_TYPE, "data": {"todos": [todo(label, "in_progress")]}},
        ]
        return "".join(json.dumps(line) + "\n" for line in lines)

    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text(log_text("AAAA-0"))
    b.write_text(log_text("BBBB-0"))
    assert a.stat().st_size == b.stat().st_size
    command = [sys.executable, "-m", "dsh_tool_todo", "watch", str(a), "--ascii"]
    with subprocess.Popen(
        [*command, "--interval", "0.05"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=ENV,
    ) as watcher:
        try:
            assert _shows(watcher, "[>] AAAA-0")
            shutil.copyfile(b, a)  # as `cp b.jsonl a.jsonl`: a's inode, written over
            assert _shows(watcher, "[>] BBBB-0", within=10)
            watcher.send_signal(signal.SIGINT)
            assert watcher.wait(timeout=30) == 0
        finally:
            watcher.kill()


def test_the_messages_above_never_hold_a_raw_control_character() -> None:
    """A guard on the escaping the tests above rely on: the checklist's, as the CLI uses."""
    from dsh_tool_todo.cli._output import shown_path

    assert shown_path("a\nb\x1b[2J\u202e") == "a\\nb\\x1b[2J\\u202e"
    assert re.fullmatch(r"[ -~]+", shown_path(b"\xff\n"))
