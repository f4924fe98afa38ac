"""``dsh-todo show``, ``watch``, ``sessions`` and ``serve`` with no SOURCE read the default place
(``DSH_TODO_HOME``, else the per-user state directory); ``--session KEY`` picks an owner's log in
a directory, and with none the most recently written; ``sessions --prune`` bounds what piles up."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from dsh_tool_todo import cli
from dsh_tool_todo.core.contract import EVENT_TYPE
from dsh_tool_todo.stores.jsonl import JsonlSession
from dsh_tool_todo.stores.owners import OwnerRegistry, owner_file_name
from tests.cli.test_cli import ENV, assert_usage_error, dsh_todo, lines_until
from tests.conftest import todo

DAY = 86400


def _record(directory: Path, key: str, content: str, *, age_days: float = 0.0) -> Path:
    """The plan ``[content]`` recorded as owner ``key``'s, as an adapter records it."""
    with OwnerRegistry(directory) as owners:
        owners.session(key).append(EVENT_TYPE, {"todos": [todo(content, "in_progress")]})
    log = directory / owner_file_name(key)
    if age_days:
        then = time.time() - age_days * DAY
        os.utime(log, (then, then))
    return log


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    status = cli.main(list(args))
    out, err = capsys.readouterr()
    return status, out, err


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``DSH_TODO_HOME`` set to a directory of the test's own."""
    place = tmp_path / "home"
    place.mkdir()
    monkeypatch.setenv("DSH_TODO_HOME", str(place))
    return place


def test_show_with_no_source_reads_dsh_todo_home(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = _record(home, "agent", "Home's plan")

    status, out, err = _run(capsys, "show", "--ascii")

    assert (status, out.splitlines()[0]) == (0, "[>] Home's plan")
    assert err == (
        f"dsh-todo: showing {log}, the most recently written (--session picks another)\n"
    )


def test_sessions_with_no_source_lists_dsh_todo_home(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run(capsys, "sessions") == (0, f"no sessions in {home}\n", "")
    _record(home, "agent", "A")
    status, out, _ = _run(capsys, "sessions")
    assert (status, out.split("\t")[0]) == (0, "agent")


def test_serve_with_no_source_serves_dsh_todo_home(
    home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from dsh_tool_todo.web import server

    served: list[tuple[str, Any]] = []

    def serve(source: str, **options: Any) -> None:
        served.append((source, options["note"]))

    monkeypatch.setattr(server, "serve", serve)
    assert _run(capsys, "serve", "--port", "8765") == (0, "", "")
    (source, note), *_ = served
    assert source == str(home)
    assert note.startswith(f"dsh-todo serve: note: {home} holds no session log yet")
    (home / "ada.jsonl").write_text("")
    assert _run(capsys, "serve", "--port", "8765") == (0, "", "")
    assert served[1] == (str(home), None)  # a log: nothing to note


@pytest.mark.parametrize("command", [["show"], ["watch"], ["sessions"], ["serve"]])
def test_a_default_place_not_made_yet_says_how_plans_get_there(
    command: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("DSH_TODO_HOME", str(tmp_path / "later"))

    status, out, err = _run(capsys, *command)

    assert (status, out) == (2, "")
    assert err == (
        f"dsh-todo: error: the default place {tmp_path / 'later'} (DSH_TODO_HOME) does not "
        "exist yet: no plans were recorded there. `dsh-todo demo` records one there, and so "
        "does an agent run with DSH_TODO_HOME naming it or given it as owners=; or name a "
        "SOURCE\n"
    )
    assert not (tmp_path / "later").exists()


@pytest.mark.skipif(sys.platform != "linux", reason="the per-user state directory of Linux")
def test_with_no_variable_the_per_user_state_directory_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    status, _, err = _run(capsys, "sessions")
    assert status == 2
    assert err.startswith(
        f"dsh-todo: error: the default place {tmp_path / 'dsh-todo'} (the per-user state "
        "directory) does not exist yet"
    )
    _record(tmp_path / "dsh-todo", "agent", "A")
    assert _run(capsys, "sessions")[1].startswith("agent\t")


def test_session_in_a_directory_shows_that_owners_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _record(tmp_path, "team/lead", "Lead's")
    _record(tmp_path, "worker", "Worker's")  # written last

    status, out, err = _run(capsys, "show", str(tmp_path), "--session", "team/lead", "--ascii")

    assert (status, out.splitlines()[0], err) == (0, "[>] Lead's", "")


def test_no_session_shows_the_most_recently_written_log_and_says_which(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _record(tmp_path, "old", "Old", age_days=2)
    latest = _record(tmp_path, "new", "New", age_days=1)

    status, out, err = _run(capsys, "show", str(tmp_path), "--ascii", "--format", "json")

    assert status == 0
    assert '"New"' in out
    assert err == (
        f"dsh-todo: showing {latest}, the most recently written (--session picks another)\n"
    )


def test_a_file_takes_no_session() -> None:
    run = dsh_todo("show", __file__, "--session", "agent", check=False)
    assert_usage_error(
        run, r"test_default_place\.py is one log: --session goes with a directory of logs or a "
    )


def test_a_directory_with_no_log_yet_is_said_so(tmp_path: Path) -> None:
    assert_usage_error(
        dsh_todo("show", str(tmp_path), check=False),
        re.escape(f"{tmp_path}: no session log in it yet (to wait for one: dsh-todo watch --wait"),
    )


def _watch(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "dsh_tool_todo", "watch", *args, "--ascii"]
    return subprocess.Popen(
        [*command, "--interval", "0.05"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        encoding="utf-8",
        env=env or ENV,
    )


def test_watch_a_directory_titles_the_most_recently_written_log(tmp_path: Path) -> None:
    _record(tmp_path, "old", "Old", age_days=2)
    latest = _record(tmp_path, "new", "New", age_days=1)
    with _watch(str(tmp_path)) as watcher:
        assert watcher.stdout is not None
        try:
            assert watcher.stdout.readline().strip() == f"{latest} (the most recently written)"
            assert watcher.stdout.readline().strip() == "[>] New"
            watcher.send_signal(signal.SIGINT)
            assert watcher.wait(timeout=30) == 0
        finally:
            watcher.kill()


def test_watch_wait_session_waits_for_an_owner_in_a_default_place_not_made_yet(
    tmp_path: Path,
) -> None:
    place = tmp_path / "later"
    with _watch("--session", "agent", "--wait", env={**ENV, "DSH_TODO_HOME": str(place)}) as w:
        assert w.stdout is not None
        assert w.stderr is not None
        try:
            assert w.stderr.readline() == (
                f"dsh-todo: waiting for {place / 'agent.jsonl'} to appear (Ctrl-C to stop)\n"
            )
            _record(place, "agent", "Index")  # the registry makes the directory
            assert "[>] Index" in lines_until(w, "[>] Index")
            w.send_signal(signal.SIGINT)
            assert w.wait(timeout=30) == 0
        finally:
            w.kill()


def test_prune_deletes_the_old_logs_of_a_directory_and_names_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _record(tmp_path, "stale", "S", age_days=10)
    _record(tmp_path, "fresh", "F", age_days=1)
    hostile = tmp_path / "evil\x1b[2J.jsonl"  # a file name no owner key makes
    with JsonlSession(hostile) as session:
        session.append(EVENT_TYPE, {"todos": [todo("E")]})
    os.utime(hostile, (time.time() - 10 * DAY,) * 2)

    status, out, err = _run(
        capsys, "sessions", str(tmp_path), "--prune", "--older-than", "7", "--dry-run"
    )
    assert (status, err) == (0, "")
    assert [line.split(" (")[0] for line in out.splitlines()] == [
        "would delete session 'evil\\x1b[2J'",
        "would delete session 'stale'",
        f"would delete 2 sessions last written over 7 days ago in {tmp_path}",
    ]
    assert hostile.exists()

    status, out, _ = _run(capsys, "sessions", str(tmp_path), "--prune", "--older-than", "7")

    lines = out.splitlines()
    assert status == 0
    assert "\x1b" not in out
    assert lines[1].startswith("deleted session 'stale' (last written 20")
    assert lines[2] == f"deleted 2 sessions last written over 7 days ago in {tmp_path}"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["fresh.jsonl"]
    assert _run(capsys, "sessions", str(tmp_path), "--prune", "--older-than", "7")[1] == (
        f"no session in {tmp_path} was last written over 7 days ago\n"
    )


def test_prune_with_no_source_bounds_the_default_place(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _record(home, "stale", "S", age_days=31)
    _record(home, "fresh", "F")
    status, out, _ = _run(capsys, "sessions", "--prune", "--older-than", "30")
    assert (status, out.splitlines()[-1]) == (
        0,
        f"deleted 1 session last written over 30 days ago in {home}",
    )
    assert sorted(path.name for path in home.iterdir()) == ["fresh.jsonl"]


@pytest.mark.parametrize("days", ["-1", "nan", "inf", "ten", ""])
def test_prune_refuses_bad_days_with_exit_2(days: str, tmp_path: Path) -> None:
    run = dsh_todo("sessions", str(tmp_path), "--prune", "--older-than", days, check=False)
    assert_usage_error(
        run,
        re.escape(f"argument --older-than: must be a number of days, 0 or more (got {days!r})"),
    )


@pytest.mark.parametrize(
    ("args", "pattern"),
    [
        (["--prune"], r"--prune needs --older-than DAYS"),
        (["--older-than", "3"], r"--older-than and --dry-run go with --prune"),
        (["--dry-run"], r"--older-than and --dry-run go with --prune"),
        (["--prune", "--older-than", "3", "--json"], r"--prune prints what it deleted"),
        (["--prune", "--older-than", "3", "--delete", "x"], r"--prune prints what it deleted"),
    ],
)
def test_prune_flags_that_do_not_go_together_are_refused(
    args: list[str], pattern: str, tmp_path: Path
) -> None:
    assert_usage_error(dsh_todo("sessions", str(tmp_path), *args, check=False), pattern)
