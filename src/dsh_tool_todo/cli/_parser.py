"""``dsh-todo``'s arguments: one small function per command adds that command's parser."""

from __future__ import annotations

import argparse
import math
import re
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
MAX_INTERVAL = 3600.0  # past the platform's clock, a sleep overflows (1e10 did)
DEFAULT_WAIT_OWNER = 30.0  # a client that starts a server per call (4 calls, 4 servers) queues
MAX_PACE = 60.0  # seconds between two demo steps: past this a demo is only a stalled process


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
        epilog=START_HERE,
        formatter_class=formatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    # not required: a bare `dsh-todo` prints this help, exit 0
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    for name, summary, description, add in _ABOUT:
        add(
            commands.add_parser(
                name,
                usage=_USAGE.get(name),
                help=summary,
                description=description,
                epilog="examples:\n" + "\n".join(f"  {line}" for line in _EXAMPLES[name]),
                formatter_class=formatter,
            )
        )
    return parser


START_HERE = """\
Start with `dsh-todo demo`: it plays a scripted agent session and leaves its plan in the
default place, where `dsh-todo serve` shows it in the browser. `dsh-todo COMMAND --help`
shows a command's options and examples; the docs are docs/index.md in the repository
(docs/cli.md for this command)."""

# What each command's --help ends with: lines a user can run as printed.
_EXAMPLES: dict[str, tuple[str, ...]] = {
    "demo": (
        "dsh-todo demo                      # play it; the log goes to the default place",
        "dsh-todo demo --serve              # play it live in the browser (extra: web)",
        "dsh-todo demo --log /tmp/demo.jsonl --ascii",
    ),
    "show": (
        "dsh-todo show                      # the newest log of the default place",
        "dsh-todo show --session ada        # owner ada's plan in the default place",
        "dsh-todo show logs/ada.jsonl --format json",
        "dsh-todo show postgresql://localhost/plans --session ada",
    ),
    "ask": (
        'dsh-todo ask --session ada --done "Write the tests"',
        'dsh-todo ask logs/ada.jsonl --note "use the staging database"',
        "dsh-todo ask --session ada --list",
    ),
    "watch": (
        "dsh-todo watch                     # the newest log of the default place, live",
        "dsh-todo watch --session ada --wait",
        "dsh-todo watch logs/ada.jsonl --interval 1",
    ),
    "schema": (
        "dsh-todo schema",
        "dsh-todo schema --format openai --parallel",
    ),
    "sessions": (
        "dsh-todo sessions                  # every session of the default place, as a tree",
        "dsh-todo sessions logs --json",
        "dsh-todo sessions --prune --older-than 30 --dry-run",
        "dsh-todo sessions postgresql://localhost/plans --delete ada",
    ),
    "db": ("dsh-todo db init postgresql://localhost/plans",),
    "mcp": (
        "dsh-todo mcp --print-config                  # paste into your MCP client's config",
        "dsh-todo mcp --print-config --client vscode  # VS Code's .vscode/mcp.json shape",
        "dsh-todo mcp --print-config --owner work     # one named log, resumed on restart",
    ),
    "serve": (
        "dsh-todo serve                     # the default place, at http://127.0.0.1:8765/",
        "dsh-todo serve logs --port 9000",
        "dsh-todo serve postgresql://localhost/plans",
        "dsh-todo serve logs --host 0.0.0.0 --expose --allow-host viewer.lan",
    ),
}


def _demo(demo: argparse.ArgumentParser) -> None:
    demo.add_argument(
        "--log",
        type=_new_log,
        help="where to write the session log (a new file; default: demo.jsonl, demo-2.jsonl, "
        "... in the default place, DSH_TODO_HOME or the per-user state directory, which "
        "`dsh-todo serve` reads with no SOURCE)",
    )
    _parallel_flag(demo, "allow several todos in_progress at once (allowParallelInProgress)")
    _ascii_flag(demo)
    demo.add_argument(
        "--serve",
        action="store_true",
        help="serve the live web view of the log's directory (extra: web) and play the session "
        "into it at a human pace, then keep serving until Ctrl-C",
    )
    demo.add_argument(
        "--pace",
        type=_pace,
        metavar="SECONDS",
        help=f"seconds between two steps of the session, 0 to {MAX_PACE:g} (default: 1.5 with "
        "--serve, else 0)",
    )
    demo.add_argument(
        "--open", action="store_true", help="with --serve: open the view in the web browser"
    )
    demo.add_argument(
        "--host", help="with --serve: a loopback address to bind (default: 127.0.0.1)"
    )
    demo.add_argument("--port", type=int, help="with --serve: port to bind (default: 8765)")


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


# A usage too long for one line, written out: Pythons wrap a group of choices differently.
_USAGE = {
    "ask": "%(prog)s [-h] [--session KEY] [--by NAME] [--json]\n"
    "       (--done ITEM | --reopen ITEM | --remove ITEM | --add ITEM | --note TEXT |\n"
    "        --withdraw ID | --list)\n"
    "       [SOURCE]",
}


def _new_log(text: str) -> Path:
    """A demo's --log: a file path, never a URL (a demo records to a JSONL file)."""
    if re.match(r"[A-Za-z][A-Za-z0-9+.-]*://", text):
        raise argparse.ArgumentTypeError(
            f"takes the path of a new JSONL file, not a URL ({text.split('://', 1)[0]}://): "
            "the demo records to a file"
        )
    return Path(text)


def _ask(ask: argparse.ArgumentParser) -> None:
    _log_argument(ask)
    what = ask.add_mutually_exclusive_group(required=True)
    for flag, meta, text in (
        ("--done", "ITEM", "ask the agent to mark ITEM completed"),
        ("--reopen", "ITEM", "ask the agent to reopen the completed ITEM"),
        ("--remove", "ITEM", "ask the agent to remove ITEM from its plan"),
        ("--add", "ITEM", "ask the agent to add ITEM to its plan"),
        ("--note", "TEXT", "leave the agent a short note"),
        ("--withdraw", "ID", "withdraw your pending request ID"),
    ):
        what.add_argument(flag, metavar=meta, help=text)
    what.add_argument(
        "--list",
        action="store_true",
        help="list the requests waiting, and how the taken ones stand",
    )
    ask.add_argument("--by", metavar="NAME", help="who asks (default: your login name)")
    ask.add_argument("--json", action="store_true", help="print the request (or list) as JSON")


def _watch(watch: argparse.ArgumentParser) -> None:
    _log_argument(watch)
    watch.add_argument(
        "--interval",
        type=_interval,
        default=0.2,
        help=f"seconds between looks, at least {MIN_INTERVAL}, at most {MAX_INTERVAL:g} "
        "(default: 0.2)",
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
        "dsn",
        metavar="SOURCE",
        nargs="?",
        help="a directory of JSONL logs, or a postgresql:// URL or libpq conninfo (default: "
        "the default place, DSH_TODO_HOME or the per-user state directory)",
    )
    sessions.add_argument("--json", action="store_true", help="the tree as one JSON document")
    sessions.add_argument(
        "--delete", metavar="ID", help="delete every event of session ID (a database only)"
    )
    sessions.add_argument(
        "--prune",
        action="store_true",
        help="delete the sessions last written over --older-than DAYS days ago (a log file by "
        "its modification time, a database session by its newest event) and name them",
    )
    sessions.add_argument(
        "--older-than",
        type=_days,
        metavar="DAYS",
        help="with --prune: how many days (a number, 0 or more; 0.5 is twelve hours)",
    )
    sessions.add_argument(
        "--dry-run", action="store_true", help="with --prune: name them, delete nothing"
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
        help="record the plan in DIR (default: the default place, DSH_TODO_HOME or the "
        "per-user state directory; ~ is expanded; a relative DIR is relative to the client's "
        "working directory)",
    )
    mcp.add_argument(
        "--owner",
        metavar="NAME",
        help="whose log: the log is DIR/<NAME's file>, resumed when a server restarts on it "
        "(default: a log of the server's own, mcp-<date>-<time>-<pid>, made by its first call)",
    )
    mcp.add_argument(
        "--in-memory",
        action="store_true",
        help="keep the plan in the server's memory only, recorded nowhere",
    )
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
        help="print the configuration a client reads to start this server with the same flags, "
        "by absolute paths, and exit",
    )
    mcp.add_argument(
        "--client",
        choices=mcp_command.CLIENTS,
        help="the shape --print-config prints: claude (Claude Desktop, Claude Code's .mcp.json) "
        'and cursor: {"mcpServers": ...}; vscode: {"servers": ...}; zed: '
        '{"context_servers": ...} (default: claude)',
    )


def _serve(serve: argparse.ArgumentParser) -> None:
    serve.add_argument(
        "source",
        metavar="SOURCE",
        nargs="?",
        help="a directory of JSONL logs, or a postgresql:// URL (default: the default place, "
        "DSH_TODO_HOME or the per-user state directory)",
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8765, help="port to bind (default: 8765)")
    serve.add_argument(
        "--expose",
        action="store_true",
        help="allow a --host other machines can reach (a token printed at start is then required)",
    )
    serve.add_argument(
        "--requests",
        action="store_true",
        help="let the page ask an agent to change its plan (mark done, reopen, remove, add, "
        "a note): the requests wait beside the logs for the agent, the plan's only writer",
    )
    serve.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="another name the server is reached by (name, name:port or [v6]:port), checked "
        "against the Host header",
    )


def _log_argument(sub: argparse.ArgumentParser) -> None:
    sub.add_argument(
        "log",
        metavar="SOURCE",
        nargs="?",
        help="a JSONL session log, a directory of logs, or a postgresql:// URL or libpq "
        "conninfo (default: the default place, DSH_TODO_HOME or the per-user state directory)",
    )
    sub.add_argument(
        "--session",
        metavar="KEY",
        help="in a directory, the log of owner KEY; in a database, session KEY (default: the "
        "most recently written; a file takes none)",
    )


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


def _bounded(low: float, high: float, refusal: str) -> Callable[[str], float]:
    """A flag's number, finite and from ``low`` to ``high``; ``refusal`` (with ``{text!r}``)
    says what else to give. Bounded, so that no sleep overflows the platform's clock."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and low <= value <= high):  # NaN, too
            raise argparse.ArgumentTypeError(refusal.format(text=text))
        return value

    return parse


_interval = _bounded(
    MIN_INTERVAL,
    MAX_INTERVAL,
    f"must be a finite number of seconds, at least {MIN_INTERVAL} and at most "
    f"{MAX_INTERVAL:g} (got {{text!r}})",
)
_days = _bounded(0, math.inf, "must be a number of days, 0 or more (got {text!r})")
_wait_seconds = _bounded(
    0, math.inf, "must be a finite number of seconds, 0 or more (got {text!r})"
)
_pace = _bounded(
    0, MAX_PACE, f"must be a number of seconds from 0 to {MAX_PACE:g} (got {{text!r}})"
)


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
        "Print the current plan of a session log: the latest todo/write not followed by a "
        "turn/start, read from the end. SOURCE is a JSONL log, a directory of logs (--session "
        "KEY: the log of owner KEY; else the most recently written) or a database "
        "(--session: the session; else the most recently written); with no SOURCE, the "
        "default place.",
        _show,
    ),
    (
        "ask",
        "ask a running agent to change its plan",
        "File a request against a session's current plan: mark an item done, reopen or "
        "remove it, add one, or leave a note. The agent stays the plan's only writer: the "
        "request waits beside its log until the agent's next model call, which is told of it "
        "once, and the agent answers with its next todo_write. SOURCE and --session pick the "
        "log as for show. --list shows what waits and how each taken request stands "
        "(honoured, not_honoured, void, delivered, withdrawn). See docs/requests.md.",
        _ask,
    ),
    (
        "watch",
        "follow a live session log and redraw its plan",
        "Follow a session log as it grows and redraw the checklist each time the plan "
        "changes, until interrupted (Ctrl-C). SOURCE and --session pick the log as for show; "
        "the title names it.",
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
        "removes one session's rows from a database (extra: postgres). --prune --older-than "
        "DAYS deletes the sessions last written over DAYS days ago and names them (--dry-run: "
        "names them only). With no SOURCE, the default place.",
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
        "server or the model replaces it. The plan is recorded in the default place "
        "(DSH_TODO_HOME, else the per-user state directory) or --log-dir, as the log of "
        "--owner NAME, resumed when a server restarts on it; with no --owner, each server "
        "records a log of its own, mcp-<date>-<time>-<pid>, made by its first call. "
        "--in-memory keeps the plan in memory only. A server that finds its owner held by "
        "another waits for it "
        "(--wait-owner). --print-config prints the client configuration that runs this "
        "command with the same flags, by absolute paths (--client: its shape).",
        _mcp,
    ),
    (
        "serve",
        "serve a read-only live view of session logs in the browser",
        "Serve a read-only web view of session logs (extra: web): a session list, and per "
        "session the plan bar and the todo_write calls of the current turn, updated live. "
        "SOURCE is a directory of *.jsonl logs or a postgresql:// URL; with none, the default "
        "place (DSH_TODO_HOME, else the per-user state directory).",
        _serve,
    ),
]
