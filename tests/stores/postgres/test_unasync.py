"""The sync PostgreSQL session is generated from the async one, and must be current."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "scripts" / "unasync.py"
GENERATED = ROOT / "src" / "dsh_tool_todo" / "stores" / "postgres" / "session.py"


def test_the_generated_sync_session_is_current() -> None:
    run = subprocess.run(
        [sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, check=False
    )
    assert run.returncode == 0, run.stdout + run.stderr


def test_the_generated_file_says_so_and_a_hand_edit_is_caught(tmp_path: Path) -> None:
    text = GENERATED.read_text(encoding="utf-8")
    assert text.startswith("# auto-generated from aio.py by scripts/unasync.py: DO NOT CHANGE\n")
    copy = tmp_path / "scripts"
    copy.mkdir()
    (copy / "unasync.py").write_text(SCRIPT.read_text(encoding="utf-8"), encoding="utf-8")
    package = tmp_path / "src" / "dsh_tool_todo" / "stores" / "postgres"
    package.mkdir(parents=True)
    (package / "aio.py").write_text(
        (GENERATED.parent / "aio.py").read_text(encoding="utf-8"), encoding="utf-8"
    )
    (package / "session.py").write_text(text.replace("pool.check()", "pass", 1), encoding="utf-8")
    (tmp_path / "pyproject.toml").write_text(
        (ROOT / "pyproject.toml").read_text(encoding="utf-8"), encoding="utf-8"
    )
    run = subprocess.run(
        [sys.executable, str(copy / "unasync.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 1
    assert re.search(r"^-\s+pass\b", run.stdout, re.MULTILINE), run.stdout
    assert re.search(r"^\+\s+pool\.check\(\)", run.stdout, re.MULTILINE), run.stdout
    assert "session.py is stale" in run.stderr
