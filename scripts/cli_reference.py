"""Write the CLI reference in docs/cli.md from the parser itself, so the docs cannot drift.

Run: python scripts/cli_reference.py        (tests/cli/test_cli.py fails when it is stale)
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from dsh_tool_todo.cli import build_parser

PAGE = Path(__file__).resolve().parents[1] / "docs" / "cli.md"
START, END = "<!-- reference:start -->", "<!-- reference:end -->"


def reference() -> str:
    parser = build_parser()
    (commands,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    sections = [("dsh-todo --help", parser.format_help())]
    sections += [
        (f"dsh-todo {name} --help", sub.format_help()) for name, sub in commands.choices.items()
    ]
    return "\n".join(
        f"### `{title}`\n\n```text\n{text.rstrip()}\n```\n" for title, text in sections
    )


def updated(page: str) -> str:
    pattern = re.compile(re.escape(START) + ".*?" + re.escape(END), re.S)
    return pattern.sub(lambda _: f"{START}\n{reference()}{END}", page)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=__doc__.split("\n\n")[0] if __doc__ else None,
        epilog="example: python scripts/cli_reference.py   (then review git diff docs/cli.md)",
    )
    parser.parse_args(argv)
    PAGE.write_text(updated(PAGE.read_text(encoding="utf-8")), encoding="utf-8")
    print(f"wrote {PAGE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
