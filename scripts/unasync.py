"""Generate the sync PostgreSQL session from the async one: aio.py -> session.py.

The PostgreSQL I/O is written once, as asyncio, in
``src/dsh_tool_todo/stores/postgres/aio.py``; this script rewrites it with the
substitutions below into ``session.py`` and formats that with ``ruff format``.

    python scripts/unasync.py           # write session.py
    python scripts/unasync.py --check   # exit 1 and print a diff when session.py is stale

Two markers in ``aio.py`` say what differs: a line ending in ``# async only``
is left out, and a line ``# unasync: CODE`` becomes ``CODE``.
"""

from __future__ import annotations

import argparse
import difflib
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "src" / "dsh_tool_todo" / "stores" / "postgres"
SOURCE = PACKAGE / "aio.py"
TARGET = PACKAGE / "session.py"
HEADER = "# auto-generated from aio.py by scripts/unasync.py: DO NOT CHANGE\n"

SUBS: list[tuple[str, str]] = [
    (r"^.*# async only\n", ""),
    (r"^(\s*)# unasync: (.*)$", r"\1\2"),
    (r"\basync def\b", "def"),
    (r"\basync with\b", "with"),
    (r"\basync for\b", "for"),
    (r"\bawait ", ""),
    (r"\b__aenter__\b", "__enter__"),
    (r"\b__aexit__\b", "__exit__"),
    (r"\basynccontextmanager\b", "contextmanager"),
    (r"\bAsyncIterator\b", "Iterator"),
    (r"\bAsyncConnectionPool\b", "ConnectionPool"),
    (r"\bpsycopg\.AsyncConnection\b", "psycopg.Connection"),
    (r"\bAsyncPostgresSession\b", "PostgresSession"),
    (r"\bResumeCache, ", ""),  # the sync session's latest() asks the index
    (r"\basync_shared_pool\b", "shared_pool"),
    (r"\bAPool\b", "Pool"),
    (r"\bASource\b", "Source"),
    (r"\ba(connect|rollback_quietly|explained|finish|borrowed|probe)\b", r"\1"),
    (r"\ba(list_sessions|read_tail|latest_event|current_plan|latest)\b", r"\1"),
]
_COMPILED = [(re.compile(pattern, re.MULTILINE), repl) for pattern, repl in SUBS]


def unasync(text: str) -> str:
    """The sync twin of ``text``, before formatting."""
    for pattern, repl in _COMPILED:
        text = pattern.sub(repl, text)
    return HEADER + text


def formatted(text: str) -> str:
    """``text`` with its imports sorted and formatted by ruff (the project's settings)."""
    ruff = Path(sys.executable).parent / "ruff"
    program = str(ruff) if ruff.exists() else "ruff"
    for step in (["check", "--select", "I", "--fix", "--quiet"], ["format"]):
        command = [program, *step, "--stdin-filename", str(TARGET), "-"]
        done = subprocess.run(command, input=text, capture_output=True, text=True, cwd=ROOT)
        if done.returncode != 0:
            raise SystemExit(f"ruff {step[0]} failed on the generated code:\n{done.stderr}")
        text = done.stdout
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog="example: python scripts/unasync.py --check   (what .ci/run runs)",
    )
    parser.add_argument("--check", action="store_true", help="fail if session.py is stale")
    args = parser.parse_args(argv)
    wanted = formatted(unasync(SOURCE.read_text(encoding="utf-8")))
    current = TARGET.read_text(encoding="utf-8") if TARGET.exists() else ""
    if not args.check:
        if current != wanted:
            TARGET.write_text(wanted, encoding="utf-8")
            print(f"wrote {TARGET.relative_to(ROOT)}")
        return 0
    if current == wanted:
        return 0
    name = str(TARGET.relative_to(ROOT))
    sys.stdout.writelines(
        difflib.unified_diff(
            current.splitlines(keepends=True),
            wanted.splitlines(keepends=True),
            f"{name} (as committed)",
            f"{name} (generated from aio.py)",
        )
    )
    print(f"{name} is stale: run `python scripts/unasync.py`", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
