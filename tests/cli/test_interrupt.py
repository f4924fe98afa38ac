"""A Ctrl-C at any moment after ``dsh-todo`` starts, its own imports included, ends it
without a traceback (``src/_dsh_todo.py``, the command's entry point)."""

from __future__ import annotations

import subprocess
import sys
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
