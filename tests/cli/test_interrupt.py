"""A Ctrl-C at any moment after ``dsh-todo`` starts, its own imports included, ends it
without a traceback (``src/_dsh_todo.py``, the command's entry point)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests._builders import plan
from tests.conftest import todo

# A Ctrl-C in the middle of the package's imports, at a chosen import, every time: an import
# hook raises KeyboardInterrupt as Python's handler would when the signal lands there.
INTERRUPTED_AT_IMPORT = """
import sys
class Interrupt:
    def find_spec(self, name, path=None, target=None):
        if name == {module!r}:
            raise KeyboardInterrupt
        return None
sys.meta_path.insert(0, Interrupt())
sys.argv = ["dsh-todo", "show", {log!r}]
import _dsh_todo
sys.exit(_dsh_todo.main())
"""


# The same moment in an extension module's start, where the interrupt surfaces as another
# exception (pyo3 turns it into a PanicException, a BaseException)
PANICKED_AT_IMPORT = """
import signal, sys
class PanicException(BaseException):
    pass
class Panic:
    def find_spec(self, name, path=None, target=None):
        if name == "pydantic_core":
            try:
                signal.raise_signal(signal.SIGINT)
            except KeyboardInterrupt:
                raise PanicException("failed to import the datetime C API") from None
        return None
sys.meta_path.insert(0, Panic())
sys.argv = ["dsh-todo", "show", {log!r}]
import _dsh_todo
sys.exit(_dsh_todo.main())
"""

BROKEN_AT_IMPORT = """
import sys
class Broken:
    def find_spec(self, name, path=None, target=None):
        if name == "pydantic_core":
            raise ImportError("a broken install")
        return None
sys.meta_path.insert(0, Broken())
sys.argv = ["dsh-todo", "show", {log!r}]
import _dsh_todo
sys.exit(_dsh_todo.main())
"""


def a_log(directory: Path) -> str:
    from dsh_tool_todo.stores.jsonl import JsonlSession

    log = directory / "a.jsonl"
    with JsonlSession(log) as session:
        session.append("todo/write", plan(todo("A")["content"]))
    return str(log)


@pytest.mark.parametrize("module", ["pydantic", "pluggy", "dsh_tool_todo.core.tool", "argparse"])
def test_a_ctrl_c_during_the_imports_ends_quietly_with_status_0(
    tmp_path: Path, module: str
) -> None:
    script = INTERRUPTED_AT_IMPORT.format(module=module, log=a_log(tmp_path))
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert (run.returncode, run.stderr) == (0, "")


def test_a_ctrl_c_that_an_extension_turns_into_a_panic_ends_quietly_too(tmp_path: Path) -> None:
    script = PANICKED_AT_IMPORT.format(log=a_log(tmp_path))
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert (run.returncode, run.stderr) == (0, "")


def test_a_broken_install_still_fails_loudly(tmp_path: Path) -> None:
    script = BROKEN_AT_IMPORT.format(log=a_log(tmp_path))
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert run.returncode == 1
    assert "ImportError: a broken install" in run.stderr


# A Ctrl-C that lands while Python runs a weakref callback or a finalizer is reported as
# "Exception ignored" and dropped there. Every import frees its module lock through such a
# callback, so a Ctrl-C during any import of the start (the package's, a command's, the health
# lines' at the first redraw) could be lost, and `watch` then ran on: the signal is raised
# here from inside such a callback, at a chosen moment.
DROPPED_IN_A_CALLBACK = """
import signal, sys, time, weakref

def land_in_a_callback():
    class Box:
        pass
    box = Box()
    ref = weakref.ref(box, lambda gone: signal.raise_signal(signal.SIGINT))
    del box

class AtImport:
    def find_spec(self, name, path=None, target=None):
        if name == {module!r}:
            sys.meta_path.remove(self)
            land_in_a_callback()
        return None

if {module!r} == "first sleep":  # after the first redraw, where watch waits for the log
    sleep = time.sleep
    def first_sleep(seconds):
        time.sleep = sleep
        land_in_a_callback()
        sleep(seconds)
    time.sleep = first_sleep
else:
    sys.meta_path.insert(0, AtImport())
sys.argv = ["dsh-todo", "watch", {log!r}, "--interval", "30"]
import _dsh_todo
sys.exit(_dsh_todo.main())
"""

ENDS_WITHIN = 20.0  # seconds a Ctrl-C may take to end `watch` on a loaded machine


def ended(child: subprocess.Popen[str], within: float = ENDS_WITHIN) -> tuple[int | None, str]:
    """``child``'s status once it ended, or ``None`` if it still runs after ``within`` s (it is
    then killed); and what it wrote on stderr."""
    try:
        _, err = child.communicate(timeout=within)
    except subprocess.TimeoutExpired:
        child.kill()
        _, err = child.communicate()
        return None, err
    return child.returncode, err


@pytest.mark.parametrize(
    "module", ["pydantic", "dsh_tool_todo.cli._plans", "dsh_tool_todo.core.health", "first sleep"]
)
def test_a_ctrl_c_dropped_in_a_callback_still_ends_watch_quietly(
    tmp_path: Path, module: str
) -> None:
    script = DROPPED_IN_A_CALLBACK.format(module=module, log=a_log(tmp_path))
    child = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert ended(child) == (0, "")


# CPython reports a Ctrl-C that lands while it checks whether the script is an import path
# entry ("Failed checking if argv[0] is an import path entry"), and runs the script all the
# same, leaving the interrupt as `sys.last_value`.
DROPPED_BY_CPYTHONS_START = """
import sys
sys.last_value = KeyboardInterrupt()
sys.argv = ["dsh-todo", "watch", {log!r}]
import _dsh_todo
sys.exit(_dsh_todo.main())
"""


def test_a_ctrl_c_cpythons_start_reported_and_went_on_ends_watch(tmp_path: Path) -> None:
    script = DROPPED_BY_CPYTHONS_START.format(log=a_log(tmp_path))
    child = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert ended(child) == (0, "")


def mapped(child: subprocess.Popen[str]) -> None:
    """Return once ``child`` has loaded pydantic-core (its memory map names it), or ended: the
    middle of the package's imports, its slowest extension being set up."""
    maps = Path(f"/proc/{child.pid}/maps")
    deadline = time.monotonic() + ENDS_WITHIN
    while child.poll() is None and time.monotonic() < deadline:
        try:
            if "pydantic_core" in maps.read_text():
                return
        except OSError:  # ended meanwhile
            return
        time.sleep(0.002)


def printed(child: subprocess.Popen[str]) -> None:
    """Return once ``child`` printed its first line (the plan's title), or ended."""
    assert child.stdout is not None
    child.stdout.readline()


def spawned(child: subprocess.Popen[str]) -> None:
    """Return at once: the signal lands wherever the start is."""


@pytest.mark.skipif(sys.platform != "linux", reason="the moments are told apart by /proc")
@pytest.mark.parametrize("moment", [spawned, mapped, printed])
def test_a_real_ctrl_c_at_moments_of_the_start_ends_watch_promptly(
    tmp_path: Path, moment: Callable[[subprocess.Popen[str]], None]
) -> None:
    command = shutil.which("dsh-todo", path=os.path.dirname(sys.executable))
    assert command is not None, "the dsh-todo script is installed beside this Python"
    log = a_log(tmp_path)
    for _ in range(4):
        child = subprocess.Popen(
            [command, "watch", log],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        moment(child)
        child.send_signal(signal.SIGINT)
        status, err = ended(child)
        assert status is not None, f"still running {ENDS_WITHIN} s after a Ctrl-C: {err}"
        # Before Python sets its own handler, SIGINT ends the process itself; before the
        # command's module is imported, the script pip writes may still be importing `re`: a
        # traceback there holds no frame of this library. (pydantic-core's own panic hook may
        # say a word on stderr when the Ctrl-C lands in its start; it is no traceback.)
        frames = re.findall(r'File "([^"]+)"', err)
        ours = [f for f in frames if f.endswith("_dsh_todo.py") or "dsh_tool_todo" in f]
        assert (ours, "Exception ignored" in err) == ([], False), err
        assert status in (0, 1, -signal.SIGINT), (status, err)
        if status != 0:
            assert moment is spawned, (status, err)
