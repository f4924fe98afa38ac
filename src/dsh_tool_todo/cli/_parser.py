"""``dsh-todo``'s arguments: one small function per command adds that command's parser."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import NoReturn

from .. import __version__
from ..core.definition import FLAVORS
from . import _mcp as mcp_command

__all__: list[str] = []

EXIT_USAGE = 2
MIN_INTERVAL = 0.05
DEFAULT_WAIT_OWNER = 30.0  # a client that starts a server per call (4 calls, 4 servers) queues


class _Parser(argparse.ArgumentParser):
    """Bad input gets one line on stderr and exit code 2, never a usage dump or traceback."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    formatter = partial(argparse.RawDescriptionHelpFormatter, width=88)
    parser = _Parser(
        prog="dsh-todo",
        description="The todo_write tool's companion: a demo session, plans of session logs, "
        "and the tool definition the model sees.",
        formatter_class=formatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    for name, summary, description, add in _ABOUT:
        add(
            commands.add_parser(
                name, help=summary, description=description, formatter_class=formatter
            )
        )
    return parser


def _demo(demo: argparse.ArgumentParser) -> None:
    demo.add_argument(
        "--log",
        type=Path,
        help="where to write the session log (a new file; default: a fresh temporary directory)",
    )
    _parallel_flag(demo, "allow several todos in_progress at once (allowParallelInProgress)")
    _ascii_flag(demo)


def _show(show: argparse.ArgumentParser) -> None:
    _log_argument(show)
    show.add_argument(
        "--format",
        choices=("text", "json", "acp"),
        default="text",
        help="a checklist (text), the list as JSON, or an ACP plan update",
    )
    _ascii_flag(show)
    _health_flag(show)


def _watch(watch: argparse.ArgumentParser) -> None:
    _log_argument(watch)
    watch.add_argument(
        "--interval",
        type=_interval,
        default=0.2,
        help=f"seconds between looks, at least {MIN_INTERVAL} (default: 0.2)",
    )
    watch.add_argument(
        "--wait",
        action="store_true",
        help="if the log (or the database session) does not exist yet, wait for it to appear",
    )
    _ascii_flag(watch)
    _health_flag(watch)


def _schema(schema: argparse.ArgumentParser) -> None:
    _parallel_flag(schema, "the definition for allowParallelInProgress: true")
    schema.add_argument(
        "--format",
        choices=FLAVORS,
        default="json",
        help="plain, OpenAI function tool, or Anthropic tool (default: json)",
    )


def _sessions(sessions: argparse.ArgumentParser) -> None:
    sessions.add_argument(
        "dsn", metavar="SOURCE", help="a directory of JSONL logs, or a postgresql:// URL"
    )
    sessions.add_argument("--json", action="store_true", help="the tree as one JSON document")
    sessions.add_argument(
        "--delete", metavar="ID", help="delete every event of session ID (a database only)"
    )


def _db(db: argparse.ArgumentParser) -> None:
    db_commands = db.add_subparsers(dest="db_command", required=True, metavar="ACTION")
    db_init = db_commands.add_parser(
        "init", help="create or upgrade the table and indexes", formatter_class=db.formatter_class
    )
    db_init.add_argument("dsn", metavar="DSN", help="a postgresql:// URL or libpq conninfo")


def _mcp(mcp: argparse.ArgumentParser) -> None:
    _parallel_flag(mcp, "allow several todos in_progress at once (allowParallelInProgress)")
    mcp.add_argument(
        "--log-dir",
        type=mcp_command.log_dir_flag,
        metavar="DIR",
        help="keep the session log in DIR (~ is expanded; a relative DIR is relative to the "
        "client's working directory)",
    )
    mcp.add_argument("--owner", metavar="NAME", help="whose log in DIR (needs --log-dir)")
    mcp.add_argument(
        "--wait-owner",
        type=_wait_seconds,
        metavar="SECONDS",
        help="how long to wait for an owner another server holds before giving up "
        f"(default: {DEFAULT_WAIT_OWNER:g}; 0 refuses at once)",
    )
    mcp.add_argument(
        "--print-config",
        action="store_true",
        help='print {"mcpServers": {"todo": ...}} for Claude Desktop, Cursor or Claude Code '
        "and exit",
    )


def _serve(serve: argparse.ArgumentParser) -> None:
    serve.add_argument("source", metavar="SOURCE", help="a directory of JSONL logs, or a URL")
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8765, help="port to bind (default: 8765)")
    serve.add_argument(
        "--expose",
        action="store_true",
        help="allow a --host other machines can reach (a token printed at start is then required)",
    )
    serve.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="another name the server is reached by, checked against the Host header",
    )


def _log_argument(sub: argparse.ArgumentParser) -> None:
    sub.add_argument(
        "log",
        metavar="LOG",
        help="a JSONL session log, or a postgresql:// URL with --session",
    )
    sub.add_argument("--session", metavar="ID", help="the session, in a database URL's LOG")


def _ascii_flag(sub: argparse.ArgumentParser) -> None:
    sub.add_argument(
        "--ascii", action="store_true", help="print ASCII only (the checklist as [x] [>] [ ])"
    )


def _health_flag(sub: argparse.ArgumentParser) -> None:
    sub.add_argument(
        "--no-health",
        dest="health",
        action="store_false",
        help="leave out the plan-health signals of the current turn under the plan",
    )


def _parallel_flag(sub: argparse.ArgumentParser, effect: str) -> None:
    sub.add_argument("--parallel", action="store_true", help=effect)


def _interval(text: str) -> float:
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds >= MIN_INTERVAL):
        raise argparse.ArgumentTypeError(
            f"must be a finite number of seconds, at least {MIN_INTERVAL} (got {text!r})"
        )
    return seconds


def _wait_seconds(text: str) -> float:
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds >= 0):
        raise argparse.ArgumentTypeError(
            f"must be a finite number of seconds, 0 or more (got {text!r})"
        )
    return seconds


# Each command: its name, its one-line summary in the list, its --help text, its arguments.
_ABOUT: list[tuple[str, str, str, Callable[[argparse.ArgumentParser], None]]] = [
    (
        "demo",
        "play a scripted agent session through the reference host",
        "Play a scripted agent session through the reference host, with the plugin loaded "
        "from its entry point: the model's todo_write calls, what the model reads back, and "
        "the checklist as it changes. The session is written to a JSONL log.",
        _demo,
    ),
    (
        "show",
        "print the current plan of a session log",
        "Print the current plan of a JSONL session log: the latest todo/write not followed "
        "by a turn/start, read from the end of the file.",
        _show,
    ),
    (
        "watch",
        "follow a live session log and redraw its plan",
        "Follow a JSONL session log as it grows and redraw the checklist each time the plan "
        "changes, until interrupted (Ctrl-C).",
        _watch,
    ),
    (
        "schema",
        "print the tool definition the model sees",
        "Print the todo_write tool definition the model sees, byte-stable (fixed key "
        "order, no whitespace).",
        _schema,
    ),
    (
        "sessions",
        "print every session as a tree of sub-agents, or delete one",
        "Print the sessions of a directory of JSONL logs or a PostgreSQL database as a "
        "tree: each session under the session it works for (its sub-agent link), with its "
        "progress, last activity, item in progress and plan-health signals; a parent not "
        "found here is shown as such. --json prints the same tree for programs. --delete "
        "removes one session's rows from a database (extra: postgres).",
        _sessions,
    ),
    (
        "db",
        "set up a PostgreSQL database for session logs",
        "Database administration (extra: postgres). `db init DSN` creates or upgrades the "
        "session-log table and its indexes; it is safe to run again.",
        _db,
    ),
    (
        "mcp",
        "serve todo_write to one MCP client over stdio",
        "Serve the todo_write tool to one MCP client over stdin/stdout (extra: mcp), and "
        "the owner's current plan as the resource todo://plan, which the client can "
        "subscribe to. One agent per server; its plan lives until the client starts a new "
        "server or the model replaces it. With --log-dir and --owner the plan is recorded "
        "in DIR and resumed when the server restarts; a server that finds its owner held by "
        "another waits for it (--wait-owner). --print-config prints the client "
        "configuration that runs this command with the same flags, by absolute paths.",
        _mcp,
    ),
    (
        "serve",
        "serve a read-only live view of session logs in the browser",
        "Serve a read-only web view of session logs (extra: web): a session list, and per "
        "session the plan bar and the todo_write calls of the current turn, updated live. "
        "SOURCE is a directory of *.jsonl logs or a postgresql:// URL.",
        _serve,
    ),
]
