"""``dsh-todo demo``: a log in the default place that ends in progress, and ``--serve``, the live
view of the demo played at a human pace."""

from __future__ import annotations

import argparse
import io
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from dsh_tool_todo.cli import build_parser, main
from dsh_tool_todo.cli._commands import demo
from dsh_tool_todo.cli._demo import SCRIPT, paced, run_demo
from dsh_tool_todo.core.contract import EVENT_TYPE, TURN_START
from dsh_tool_todo.errors import MissingExtra, UsageError
from dsh_tool_todo.stores import current_plan
from dsh_tool_todo.stores.jsonl import read_events
from tests._processes import stop_process
from tests.cli.test_cli import assert_usage_error, dsh_todo

LAST_PLAN = SCRIPT[-1][1][-1]["todos"]
WORKING_ON = "Run CI and check its output"  # the last plan's item in progress, its "Now:"
HOST = "127.0.0.1"


def parsed(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["demo", *argv])


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The default place, not made yet: the demo makes it."""
    place = tmp_path / "state" / "dsh-todo"
    monkeypatch.setenv("DSH_TODO_HOME", str(place))
    return place


def test_the_script_ends_with_a_plan_in_progress() -> None:
    statuses = [item["status"] for item in LAST_PLAN]
    assert statuses.count("in_progress") == 1
    assert "completed" in statuses
    assert "pending" in statuses


def test_a_plain_demo_leaves_a_plan_in_progress_in_the_default_place(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["demo"]) == 0

    log = home / "demo.jsonl"
    assert current_plan(log) == LAST_PLAN
    events = read_events(log)
    assert events[-1]["type"] == EVENT_TYPE, "the last turn is still at work"
    out = capsys.readouterr().out
    assert f"session log: {log}\n" in out
    # in the default place, `serve` needs no SOURCE
    assert out.rstrip().splitlines()[-1].endswith(" serve)")


def test_two_demos_do_not_overwrite_each_other(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["demo"]) == 0
    first = (home / "demo.jsonl").read_bytes()

    assert main(["demo"]) == 0

    assert (home / "demo.jsonl").read_bytes() == first
    assert current_plan(home / "demo-2.jsonl") == LAST_PLAN
    assert f"session log: {home / 'demo-2.jsonl'}\n" in capsys.readouterr().out


def test_a_log_elsewhere_names_its_directory_to_serve(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "elsewhere" / "mine.jsonl"
    log.parent.mkdir()

    assert main(["demo", "--log", str(log)]) == 0

    assert not home.exists()
    assert capsys.readouterr().out.rstrip().endswith(f" serve {log.parent})")


def test_a_database_as_the_default_place_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DSH_TODO_HOME", "postgresql://nobody@127.0.0.1:1/agents")
    with pytest.raises(UsageError, match=r"DSH_TODO_HOME names a database.*pass --log PATH"):
        demo(parsed(), io.StringIO())


@pytest.mark.parametrize("flag", [["--open"], ["--host", HOST], ["--port", "8765"]])
def test_the_view_flags_go_with_serve(home: Path, flag: list[str]) -> None:
    with pytest.raises(UsageError, match=f"^{flag[0]} goes with --serve"):
        demo(parsed(*flag), io.StringIO())
    assert not home.exists()


def test_the_pace_is_taken_before_each_step_and_can_stop_the_session(tmp_path: Path) -> None:
    steps = len(SCRIPT) + sum(len(calls) for _prompt, calls in SCRIPT)
    asked: list[int] = []

    def go_on() -> bool:
        asked.append(len(asked))
        return True

    assert run_demo(tmp_path / "whole.jsonl", io.StringIO(), go_on=go_on)
    assert len(asked) == steps

    stopped = tmp_path / "stopped.jsonl"
    assert not run_demo(stopped, io.StringIO(), go_on=lambda: len(asked) < steps + 3 and go_on())
    # the turn's start and the first call were played; the third step was not
    types = [event["type"] for event in read_events(stopped)]
    assert types == [TURN_START, EVENT_TYPE]


def test_a_paced_session_stops_at_once_when_told() -> None:
    stop = threading.Event()
    go_on = paced(60, stop)
    stop.set()
    began = time.monotonic()
    assert go_on() is False
    assert time.monotonic() - began < 5
    assert paced(0)() is True


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--host", "0.0.0.0"], "--host 0.0.0.0 is reachable from other machines"),
        (["--host", "192.0.2.1"], "the demo serves this machine only"),
        (["--port", "0"], r"--port must be from 1 to 65535 \(got 0\)"),
    ],
)
def test_the_demo_serves_loopback_only(home: Path, flags: list[str], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        demo(parsed("--serve", *flags), io.StringIO())
    assert not home.exists()


def test_a_port_in_use_is_named_and_nothing_is_written(home: Path) -> None:
    with socket.socket() as taken:
        taken.bind((HOST, 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(
            UsageError, match=rf"^cannot listen on 127\.0\.0\.1:{port}: .*: pass another --port$"
        ):
            demo(parsed("--serve", "--port", str(port)), io.StringIO())
    assert not home.exists()


def test_without_the_web_extra_the_error_names_it(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "uvicorn", None)
    with pytest.raises(MissingExtra, match=r"needs the 'web' extra.*pip install '\.\[web\]'"):
        demo(parsed("--serve"), io.StringIO())
    assert not home.exists()


# --- demo --serve as a process -----------------------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        port: int = probe.getsockname()[1]
        return port


@contextmanager
def demo_serving(home: Path, *flags: str) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """``dsh-todo demo --serve`` on a free port, recording to ``home``; the process and the
    base URL, once its banner is printed."""
    port = free_port()
    environment = {**os.environ, "DSH_TODO_HOME": str(home), "PYTHONUNBUFFERED": "1"}
    command = [sys.executable, "-m", "dsh_tool_todo", "demo", "--serve", "--port", str(port)]
    process = subprocess.Popen(
        [*command, *flags],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        encoding="utf-8",
        env=environment,
    )
    try:
        yield process, f"http://{HOST}:{port}"
    finally:
        stop_process(process)


def lines_until(process: subprocess.Popen[str], wanted: str) -> list[str]:
    """The lines ``process`` prints up to one holding ``wanted`` (fails if it ends first)."""
    assert process.stdout is not None
    seen: list[str] = []
    while not seen or wanted not in seen[-1]:
        line = process.stdout.readline()
        assert line, f"ended before {wanted!r}: {seen}"
        seen.append(line.rstrip("\n"))
    return seen


def eventually(read: Callable[[], Any], done: Callable[[Any], bool], within: float = 30) -> Any:
    """``read()`` again until ``done`` holds for what it returns, or fail after ``within`` s."""
    deadline = time.monotonic() + within
    while True:
        try:
            value = read()
        except httpx.TransportError:
            value = None
        if value is not None and done(value):
            return value
        assert time.monotonic() < deadline, f"not done within {within} s: {value!r}"
        time.sleep(0.02)


def demo_row(base: str) -> dict[str, Any] | None:
    rows = httpx.get(f"{base}/api/sessions", timeout=5).json()["sessions"]
    return next((row for row in rows if row["name"] == "demo"), None)


def test_demo_serve_plays_the_session_into_the_view_then_serves_until_ctrl_c(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    browser = tmp_path / "browser"
    opened = tmp_path / "opened.txt"
    browser.write_text(f'#!/bin/sh\necho "$1" > {opened}\n')
    browser.chmod(0o755)
    home = tmp_path / "home"
    monkeypatch.setenv("BROWSER", str(browser))  # the child's browser: opened only with --open
    with demo_serving(home, "--pace", "0.01") as (process, base):
        banner = lines_until(process, "Press Ctrl-C to stop.")
        row = eventually(lambda: demo_row(base), lambda row: row["workingOn"] == WORKING_ON)
        now = httpx.get(f"{base}/api/sessions/demo/projection", timeout=5).json()
        page = httpx.get(
            f"{base}/api/sessions/demo/events",
            params={"types": f"{EVENT_TYPE},{TURN_START}", "limit": 500},
            timeout=5,
        ).json()
        played = lines_until(process, "the view keeps serving")
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 0
        assert process.stderr is not None
        errors = process.stderr.read()

    assert banner[0] == f"Serving {home} (read-only) at {base}/"
    assert banner[1] == f"The demo plays into {home / 'demo.jsonl'}: watch it at {base}/s/demo"
    assert "=== turn 1" in "\n".join(played), "played after the banner, not before"
    assert row["progress"] == {"completed": 2, "total": 4, "inProgress": 1, "cleared": False}
    assert now["plan"] == LAST_PLAN
    # the plan grew step by step: each write of the last turn completes one more item
    turns: list[list[list[dict[str, str]]]] = []
    for event in page["events"]:
        if event["type"] == TURN_START:
            turns.append([])
        else:
            turns[-1].append(event["data"]["todos"])
    done = [[item["status"] for item in plan].count("completed") for plan in turns[-1]]
    assert done == [0, 1, 2]
    assert errors == ""
    assert not opened.exists(), "a browser is opened only with --open"


def test_demo_serve_open_opens_the_session_page(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    browser = tmp_path / "browser"
    opened = tmp_path / "opened.txt"
    browser.write_text(f'#!/bin/sh\necho "$1" > {opened}.part && mv {opened}.part {opened}\n')
    browser.chmod(0o755)
    monkeypatch.setenv("BROWSER", str(browser))
    with demo_serving(tmp_path / "home", "--open", "--pace", "0") as (process, base):
        lines_until(process, "the view keeps serving")
        url = eventually(lambda: opened.exists() and opened.read_text(), bool)
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 0

    assert url.strip() == f"{base}/s/demo"


def test_a_demo_log_given_as_a_url_is_refused_not_made_a_file() -> None:
    run = dsh_todo("demo", "--log", "postgresql://postgres@127.0.0.1/db", check=False)
    assert_usage_error(run, r"--log: takes the path of a new JSONL file, not a URL")
    assert not Path("postgresql:").exists()
