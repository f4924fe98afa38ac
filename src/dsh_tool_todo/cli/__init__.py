"""``dsh-todo``: run the demo session, show or watch a session log's plan, print the schema.

:func:`main` runs one command and turns every error into one line on stderr and exit
status 2; each command's module is imported only when that command runs (``_commands``:
demo, schema, mcp, serve; ``_plans``: show, watch; ``_sources``: sessions, db).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import warnings
from collections.abc import Callable, Sequence
from typing import TextIO

from ..errors import TodoError
from ._output import reader_gone, reason, warn_in_one_line
from ._parser import EXIT_USAGE, build_parser

__all__ = ["build_parser", "main"]

Command = Callable[[argparse.Namespace, TextIO], int]


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    command: Command = _COMMANDS[args.command]
    out = sys.stdout
    if out is None:  # started with its standard output closed (`>&-`)
        print("dsh-todo: error: standard output is closed", file=sys.stderr)
        return EXIT_USAGE
    try:
        with warnings.catch_warnings():
            warnings.showwarning = warn_in_one_line
            status = command(args, out)
            out.flush()  # a closed pipe is met here, not at exit
            return status
    except BrokenPipeError:
        return reader_gone(out)
    except (OSError, TodoError) as error:
        print(f"dsh-todo: error: {reason(error)}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        # A Ctrl-C that escaped an eval() or exec() of a string on its way here (a dataclass or
        # named tuple class being made by an import inside the command, say) leaves CPython's
        # "unhandled KeyboardInterrupt" flag set although it is handled here: under `python -m`
        # the interpreter would end itself with SIGINT at exit, not with this status. Running a
        # string clears the flag (an audit hook may refuse it: then the status is all we lose).
        with contextlib.suppress(Exception):
            exec("")
        return 0


def _lazy(module: str, name: str) -> Command:
    """The command ``name`` of the private module ``module``, imported when the command runs."""

    def run(args: argparse.Namespace, out: TextIO) -> int:
        import importlib

        command: Command = getattr(importlib.import_module(f"{__name__}.{module}"), name)
        return command(args, out)

    return run


_COMMANDS: dict[str, Command] = {
    "mcp": _lazy("_commands", "mcp"),
    "sessions": _lazy("_sources", "sessions"),
    "db": _lazy("_sources", "db"),
    "demo": _lazy("_commands", "demo"),
    "show": _lazy("_plans", "show"),
    "ask": _lazy("_requests", "ask"),
    "watch": _lazy("_plans", "watch"),
    "schema": _lazy("_commands", "schema"),
    "serve": _lazy("_commands", "serve"),
}
