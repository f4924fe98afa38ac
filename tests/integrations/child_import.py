"""An adapter imported in a fresh interpreter where finding some module fails.

What the import prints is what a user sees: the tests compare it to the promised text.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def python(code: str, *, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``code`` run by this interpreter in a child process, its output captured."""
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd, timeout=120
    )


def import_where_finding_fails(
    adapter: str, *, when: str, raises: str, catch: str = "ImportError", show: str = "error"
) -> subprocess.CompletedProcess[str]:
    """Import ``adapter`` where finding a module ``name`` for which ``when`` holds raises
    ``raises``; the ``catch`` error it meets is printed as ``show``."""
    code = (
        "import sys\n"
        "class Failing:  # a finder that fails for the named modules\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        f"        if {when}:\n"
        f"            raise {raises}\n"
        "sys.meta_path.insert(0, Failing())\n"
        "from dsh_tool_todo.integrations import MissingExtra\n"
        f"try:\n    import {adapter}\n"
        f"except {catch} as error:\n"
        f"    print({show})\n"
    )
    return python(code)
