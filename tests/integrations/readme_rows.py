"""The README's framework table, read as a user reads it: each row's lines (run by the tests as
printed) and its "watch it" command, and the checks that a plan the row recorded is where the
CLI's default place shows it.

Imported by ``test_readme_rows.py`` and by ``test_crewai.py`` (whose environment has crewai
and none of the other frameworks): only the standard library, pytest and this package here.
"""

from __future__ import annotations

import json
import os
import queue
import re
import shlex
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from dsh_tool_todo.integrations._binding import Binding
from dsh_tool_todo.stores._home import HOME_VARIABLE
from dsh_tool_todo.stores.owners import OwnerRegistry
from tests._processes import stop_process

ROOT = Path(__file__).resolve().parents[2]
READMES = ["README.md", "README.zh.md"]
PLAN = [{"content": "Read the failing test", "status": "in_progress"}]
# what a row's command names the key by; the test puts the key its run recorded under
PLACEHOLDERS = ("USER_ID", "THREAD_ID", "SESSION_ID")
WAIT_SECONDS = 60


@dataclass(frozen=True)
class Row:
    code: str  # the lines cell's code spans, one per line, as printed
    watch: list[str]  # the "watch it" command's arguments after `dsh-todo`

    @property
    def comment(self) -> str:
        """What the last line's comment says to run next (its statements, `;`-separated)."""
        return self.code.rsplit("  # ", 1)[1] if "  # " in self.code else ""


def row(readme: str, page: str) -> Row:
    """The row of ``readme``'s framework table that links docs/integrations/``page``.md;
    "the same" in its watch cell: the row above's command."""
    text = (ROOT / readme).read_text(encoding="utf-8")
    table = [line for line in text.splitlines() if line.startswith("| [")]
    return _row(
        table,
        [f"(docs/integrations/{page}.md)" in line.split(" | ")[0] for line in table].index(True),
    )


def _row(table: list[str], index: int) -> Row:
    cells = table[index].split(" | ")
    code = "\n".join(re.findall(r"`([^`]+)`", cells[2].replace("<br>", "\n")))
    watched = [span for span in re.findall(r"`([^`]+)`", cells[3]) if span.startswith("dsh-todo ")]
    if not watched:  # "the same" / "同上"
        return Row(code, _row(table, index - 1).watch)
    return Row(code, shlex.split(watched[0])[1:])


@contextmanager
def recording_home(monkeypatch: pytest.MonkeyPatch, home: Path) -> Iterator[Path]:
    """``DSH_TODO_HOME`` at ``home`` for the adapters built inside; on leaving, the registries
    they opened there are closed, so every log is whole and no writer is left open."""
    monkeypatch.setenv(HOME_VARIABLE, str(home))
    opened: list[OwnerRegistry] = []
    registry = Binding.registry

    def tracked(adapter: str, owners: object, **default: Any) -> OwnerRegistry:
        found = registry(adapter, owners, **default)
        opened.append(found)
        return found

    monkeypatch.setattr(Binding, "registry", staticmethod(tracked))
    try:
        yield home
    finally:
        for owners in opened:
            owners.close()


def dsh_todo(home: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``dsh-todo ARGS`` in a child process whose environment names ``home``."""
    return subprocess.run(
        [sys.executable, "-m", "dsh_tool_todo", *args],
        capture_output=True,
        text=True,
        encoding="utf-8",
        env={**os.environ, HOME_VARIABLE: str(home)},
        cwd=cwd,
        timeout=WAIT_SECONDS,
    )


def listed(home: Path) -> dict[str, dict[str, Any]]:
    """``dsh-todo sessions --json`` with no source: each session, sub-agents too, by key."""
    run = dsh_todo(home, "sessions", "--json")
    assert run.returncode == 0, run.stderr
    found: dict[str, dict[str, Any]] = {}
    todo = list(json.loads(run.stdout)["sessions"])
    while todo:
        session = todo.pop()
        found[session["key"]] = session
        todo += session.get("children", [])
    return found


def printed_until(argv: list[str], home: Path, wanted: str, cwd: Path | None) -> list[str]:
    """What a command that runs until stopped (``watch``) prints until a line holds
    ``wanted``, it ends, or the deadline passes; then it is stopped."""
    process = subprocess.Popen(
        [sys.executable, "-m", "dsh_tool_todo", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        encoding="utf-8",
        env={**os.environ, HOME_VARIABLE: str(home)},
        cwd=cwd,
    )
    assert process.stdout is not None
    lines: queue.Queue[str | None] = queue.Queue()
    stdout = process.stdout

    def read() -> None:
        for line in stdout:
            lines.put(line.rstrip("\n"))
        lines.put(None)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    seen: list[str] = []
    deadline = time.monotonic() + WAIT_SECONDS
    try:
        while not any(wanted in line for line in seen):
            try:
                line = lines.get(timeout=max(deadline - time.monotonic(), 0.001))
            except queue.Empty:
                break
            if line is None:  # it ended: its error is the reason
                assert process.stderr is not None
                seen.append(process.stderr.read())
                break
            seen.append(line)
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=WAIT_SECONDS)
        reader.join(timeout=WAIT_SECONDS)  # the pipe's end: the reader is done with it
        stop_process(process)
    return seen


def assert_shown(home: Path, watch: list[str], key: str | None, *, cwd: Path | None = None) -> None:
    """The plan recorded under ``key`` (``None``: the one session there, whatever its key):
    listed by ``dsh-todo sessions`` (no source), printed by ``dsh-todo show --session KEY``
    and by the row's own command, ``KEY`` put in it."""
    content = PLAN[0]["content"]
    sessions = listed(home)
    if key is None:
        assert len(sessions) == 1, sorted(sessions)
        (key,) = sessions
    assert key in sessions, f"{key!r} is not among {sorted(sessions)}"
    assert sessions[key]["inProgress"] == [content]
    shown = dsh_todo(home, "show", "--session", key, cwd=cwd)
    assert shown.returncode == 0, shown.stderr
    assert content in shown.stdout
    argv = [_keyed(arg, key) for arg in watch]
    assert argv[0] == "watch"
    seen = printed_until(argv, home, content, cwd)
    assert any(content in line for line in seen), seen


def _keyed(arg: str, key: str) -> str:
    for placeholder in PLACEHOLDERS:
        arg = arg.replace(placeholder, key)
    return arg
