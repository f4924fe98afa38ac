"""What ``dsh-todo`` says about itself: a bare command prints help, every help has examples
that parse as printed."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from dsh_tool_todo.cli import build_parser, main
from dsh_tool_todo.cli._parser import _EXAMPLES


def test_a_bare_dsh_todo_prints_help_that_starts_with_the_demo_and_exits_0(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main([]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: dsh-todo")
    assert "Start with `dsh-todo demo`" in out
    assert "docs/index.md" in out


def test_a_bare_dsh_todo_as_a_process_exits_0() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "dsh_tool_todo"], capture_output=True, text=True, timeout=60
    )
    assert (run.returncode, run.stderr) == (0, "")
    assert "Start with `dsh-todo demo`" in run.stdout


def commands() -> list[str]:
    parser = build_parser()
    (group,) = [a for a in parser._actions if a.dest == "command"]
    return sorted(group.choices)  # type: ignore[arg-type]


def test_every_command_has_examples() -> None:
    assert sorted(_EXAMPLES) == commands()


@pytest.mark.parametrize("command", commands())
def test_each_command_help_ends_with_examples_that_parse_as_printed(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main([command, "--help"])
    assert exit_.value.code == 0
    help_text = capsys.readouterr().out
    assert "\nexamples:\n" in help_text
    for line in _EXAMPLES[command]:
        assert f"  {line}" in help_text
        words = shlex.split(line, comments=True)
        assert words[0] == "dsh-todo"
        args = build_parser().parse_args(words[1:])
        assert args.command == command


def test_serve_names_what_a_source_is_when_it_is_no_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "demo.jsonl"
    log.write_text("")
    cases = {
        str(
            log
        ): rf"is one session log, not a directory of them: give its directory \({tmp_path}\)",
        "http://localhost:8000/x": r"http:// is not a source: give a directory of session logs",
        str(tmp_path / "nope"): r"nope: not a directory of session logs \(there is nothing",
    }
    for source, said in cases.items():
        assert main(["serve", source, "--port", "1"]) == 2
        assert re.search(said, capsys.readouterr().err.strip())


def test_the_demo_makes_the_directory_of_its_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "new" / "deeper" / "demo.jsonl"
    assert main(["demo", "--log", str(log)]) == 0
    assert log.is_file()
