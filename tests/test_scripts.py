"""The repository's scripts answer ``--help``, and a script's command a page prints runs as
printed on data the repository ships."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = [
    *sorted(p for p in (ROOT / "scripts").glob("*.py") if not p.name.startswith("_")),
    ROOT / "benchmarks" / "run.py",
]
PAGES = sorted((ROOT / "docs").rglob("*.md"))
# a console block's command line that runs one of this repository's scripts
COMMAND = re.compile(r"^\$ (python (?:scripts|benchmarks)/\S+\.py(?: .*)?)$")
BLOCK = re.compile(r"^```(?:text|console|sh)\n(.*?)^```", re.S | re.M)


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda path: path.name)
def test_each_script_answers_help_with_usage_and_status_0(script: Path) -> None:
    answer = run(str(script.relative_to(ROOT)), "--help")

    assert (answer.returncode, answer.stderr) == (0, "")
    assert answer.stdout.startswith("usage: ")


def printed_commands() -> list[tuple[str, str, list[str]]]:
    """Each ``$ python scripts/...`` line of a docs console block: (page, command, output)."""
    found = []
    for page in PAGES:
        for block in BLOCK.findall(page.read_text(encoding="utf-8")):
            lines = block.splitlines()
            for index, line in enumerate(lines):
                command = COMMAND.match(line)
                if command is None:
                    continue
                rest = lines[index + 1 :]
                end = next((n for n, later in enumerate(rest) if later.startswith("$ ")), len(rest))
                found.append((page.name, command.group(1), rest[:end]))
    return found


def test_the_docs_print_a_script_command() -> None:
    assert ("fleet.md", "health_of_transcripts.py") in {
        (page, command.split()[1].rpartition("/")[2]) for page, command, _ in PRINTED
    }


PRINTED = printed_commands()


@pytest.mark.parametrize(
    ("page", "command", "output"),
    PRINTED,
    ids=[f"{page}:{command.split()[1]}" for page, command, _ in PRINTED],
)
def test_a_printed_script_command_runs_as_printed(
    page: str, command: str, output: list[str]
) -> None:
    """Run from the repository's root, on the files it names (shipped), it prints what the
    page shows."""
    answer = run(*shlex.split(command)[1:])

    assert answer.returncode == 0, answer.stderr
    assert answer.stdout.splitlines() == output


def test_health_of_transcripts_names_a_missing_transcript_in_one_line() -> None:
    answer = run("scripts/health_of_transcripts.py", "missing.jsonl")

    assert answer.returncode == 2
    assert "Traceback" not in answer.stderr
    assert answer.stderr.splitlines()[-1] == (
        "health_of_transcripts.py: error: cannot read missing.jsonl: "
        "[Errno 2] No such file or directory: 'missing.jsonl'"
    )
