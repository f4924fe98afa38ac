"""``dsh-todo``: run the demo session, show or watch a session log's plan, print the schema."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import os
import shlex
import sys
import warnings
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any, NoReturn, TextIO, cast

from .. import __version__
from ..core.definition import FLAVORS, definition_json
from ..core.health import Signal, describe
from ..core.options import PLUGIN_NAME
from ..core.schema import canonical_json
from ..errors import TodoError, UsageError
from ..host import Host
from ..host.loader import discover_plugins
from ..plans.acp import plan_update
from ..plans.checklist import escape_content, glyphs_encodable, render_checklist, stream_style
from ..stores import (
    current_plan,
    follow_plans,
    init_database,
    print_fleet,
    print_sessions,
    turn_signals,
)
from . import _mcp as mcp_command

__all__ = ["build_parser", "main"]

EXIT_USAGE = 2
EXIT_CLOSED_PIPE = 141  # as a shell reports a command that SIGPIPE ended: `| head` closed it
MIN_INTERVAL = 0.05
DEFAULT_WAIT_OWNER = 30.0  # a client that starts a server per call (4 calls, 4 servers) queues
REDRAW_SEPARATOR = "----"


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

    def command(name: str, summary: str, description: str) -> argparse.ArgumentParser:
        return commands.add_parser(
            name, help=summary, description=description, formatter_class=formatter
        )

    def log_argument(sub: argparse.ArgumentParser) -> None:
        sub.add_argument(
            "log",
            metavar="LOG",
            help="a JSONL session log, or a postgresql:// URL with --session",
        )
        sub.add_argument("--session", metavar="ID", help="the session, in a database URL's LOG")

    def ascii_flag(sub: argparse.ArgumentParser) -> None:
        sub.add_argument(
            "--ascii", action="store_true", help="print ASCII only (the checklist as [x] [>] [ ])"
        )

    def health_flag(sub: argparse.ArgumentParser) -> None:
        sub.add_argument(
            "--no-health",
            dest="health",
            action="store_false",
            help="leave out the plan-health signals of the current turn under the plan",
        )

    def parallel_flag(sub: argparse.ArgumentParser, effect: str) -> None:
        sub.add_argument("--parallel", action="store_true", help=effect)

    demo = command(
        "demo",
        "play a scripted agent session through the reference host",
        "Play a scripted agent session through the reference host, with the plugin loaded "
        "from its entry point: the model's todo_write calls, what the model reads back, and "
        "the checklist as it changes. The session is written to a JSONL log.",
    )
    demo.add_argument(
        "--log",
        type=Path,
        help="where to write the session log (a new file; default: a fresh temporary directory)",
    )
    parallel_flag(demo, "allow several todos in_progress at once (allowParallelInProgress)")
    ascii_flag(demo)

    show = command(
        "show",
        "print the current plan of a session log",
        "Print the current plan of a JSONL session log: the latest todo/write not followed "
        "by a turn/start, read from the end of the file.",
    )
    log_argument(show)
    show.add_argument(
        "--format",
        choices=("text", "json", "acp"),
        default="text",
        help="a checklist (text), the list as JSON, or an ACP plan update",
    )
    ascii_flag(show)
    health_flag(show)

    watch = command(
        "watch",
        "follow a live session log and redraw its plan",
        "Follow a JSONL session log as it grows and redraw the checklist each time the plan "
        "changes, until interrupted (Ctrl-C).",
    )
    log_argument(watch)
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
    ascii_flag(watch)
    health_flag(watch)

    schema = command(
        "schema",
        "print the tool definition the model sees",
        "Print the todo_write tool definition the model sees, byte-stable (fixed key "
        "order, no whitespace).",
    )
    parallel_flag(schema, "the definition for allowParallelInProgress: true")
    schema.add_argument(
        "--format",
        choices=FLAVORS,
        default="json",
        help="plain, OpenAI function tool, or Anthropic tool (default: json)",
    )
    sessions = command(
        "sessions",
        "print every session as a tree of sub-agents, or delete one",
        "Print the sessions of a directory of JSONL logs or a PostgreSQL database as a "
        "tree: each session under the session it works for (its sub-agent link), with its "
        "progress, last activity, item in progress and plan-health signals; a parent not "
        "found here is shown as such. --json prints the same tree for programs. --delete "
        "removes one session's rows from a database (extra: postgres).",
    )
    sessions.add_argument(
        "dsn", metavar="SOURCE", help="a directory of JSONL logs, or a postgresql:// URL"
    )
    sessions.add_argument("--json", action="store_true", help="the tree as one JSON document")
    sessions.add_argument(
        "--delete", metavar="ID", help="delete every event of session ID (a database only)"
    )
    db = command(
        "db",
        "set up a PostgreSQL database for session logs",
        "Database administration (extra: postgres). `db init DSN` creates or upgrades the "
        "session-log table and its indexes; it is safe to run again.",
    )
    db_commands = db.add_subparsers(dest="db_command", required=True, metavar="ACTION")
    db_init = db_commands.add_parser(
        "init", help="create or upgrade the table and indexes", formatter_class=formatter
    )
    db_init.add_argument("dsn", metavar="DSN", help="a postgresql:// URL or libpq conninfo")
    mcp = command(
        "mcp",
        "serve todo_write to one MCP client over stdio",
        "Serve the todo_write tool to one MCP client over stdin/stdout (extra: mcp), and "
        "the owner's current plan as the resource todo://plan, which the client can "
        "subscribe to. One agent per server; its plan lives until the client starts a new "
        "server or the model replaces it. With --log-dir and --owner the plan is recorded "
        "in DIR and resumed when the server restarts; a server that finds its owner held by "
        "another waits for it (--wait-owner). --print-config prints the client "
        "configuration that runs this command with the same flags, by absolute paths.",
    )
    parallel_flag(mcp, "allow several todos in_progress at once (allowParallelInProgress)")
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
    serve = command(
        "serve",
        "serve a read-only live view of session logs in the browser",
        "Serve a read-only web view of session logs (extra: web): a session list, and per "
        "session the plan bar and the todo_write calls of the current turn, updated live. "
        "SOURCE is a directory of *.jsonl logs or a postgresql:// URL.",
    )
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
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    command: Callable[[argparse.Namespace, TextIO], int] = _COMMANDS[args.command]
    out = sys.stdout
    if out is None:  # started with its standard output closed (`>&-`)
        print("dsh-todo: error: standard output is closed", file=sys.stderr)
        return EXIT_USAGE
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _warn_in_one_line
            status = command(args, out)
            out.flush()  # a closed pipe is met here, not at exit
            return status
    except BrokenPipeError:
        return _reader_gone(out)
    except (OSError, TodoError) as error:
        print(f"dsh-todo: error: {_reason(error)}", file=sys.stderr)
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


def _demo(args: argparse.Namespace, out: TextIO) -> int:
    import tempfile  # here, not at import: it brings shutil and the compression modules

    from .demo import run_demo

    log = args.log or Path(tempfile.mkdtemp(prefix="dsh-todo-")) / "session.jsonl"
    if log.exists():
        raise FileExistsError(f"{log} already exists: the demo writes a new log, pick another")
    text = _text_out(out, args.ascii)
    run_demo(log, text, parallel=args.parallel, draw=_drawer(text, args.ascii))
    # as this shell can run it: `dsh-todo` only when PATH finds this one, and `serve` only
    # when the web extra is installed
    import importlib.util
    import shutil

    command = mcp_command.own_command()
    found = shutil.which("dsh-todo")
    if found is not None and [os.path.realpath(found)] == [*map(os.path.realpath, command)]:
        command = ["dsh-todo"]
    me = shlex.join(command)
    hint = f"next: {me} show {shlex.quote(str(log))}"
    if all(importlib.util.find_spec(name) for name in ("starlette", "uvicorn", "sse_starlette")):
        hint += f"    (or: {me} serve {shlex.quote(str(log.parent))})"
    print(hint, file=text)
    return 0


def _show(args: argparse.Namespace, out: TextIO) -> int:
    plan = current_plan(args.log, args.session)
    if args.format == "json":
        _print_utf8(out, canonical_json(plan))
    elif args.format == "acp":
        _print_utf8(out, canonical_json(plan_update(plan or [])))
    else:
        text = _text_out(out, args.ascii)
        print(_drawer(text, args.ascii)(plan or []), file=text)
        if args.health:
            _print_signals(text, turn_signals(args.log, args.session))
    return 0


def _print_signals(text: TextIO, signals: Sequence[Signal]) -> None:
    """The plan-health signals of the turn under the plan, one line each, escaped."""
    for signal in signals:
        print("! " + escape_content(describe(signal), encoding=text.encoding), file=text)


def _watch(args: argparse.Namespace, out: TextIO) -> int:
    wait = _say_waiting if args.wait else None
    try:
        title, plans = follow_plans(args.log, args.session, wait=wait, interval=args.interval)
    except FileNotFoundError as error:
        raise FileNotFoundError(
            f"{error} (to wait for it to appear: dsh-todo watch --wait)"
        ) from None
    text = _text_out(out, args.ascii)
    draw = _drawer(text, args.ascii)
    clear = _clear_screen(out)
    header = escape_content(title, encoding=text.encoding)
    lead = clear
    for plan in plans:
        print(f"{lead}{header}\n{draw(plan or [])}", file=text, flush=not args.health)
        if args.health:
            _print_signals(text, turn_signals(args.log, args.session))
            text.flush()
        lead = clear or f"{REDRAW_SEPARATOR}\n"  # piped or TERM=dumb: redraws one after another
    return 0


def _say_waiting(what: str) -> None:
    print(f"dsh-todo: waiting for {what} to appear (Ctrl-C to stop)", file=sys.stderr, flush=True)


def _schema(args: argparse.Namespace, out: TextIO) -> int:
    options = {PLUGIN_NAME: {"allowParallelInProgress": args.parallel}}
    tool = Host(discover_plugins(), options, projections=False).tools["todo_write"]
    _print_utf8(out, definition_json(tool, args.format))
    return 0


def _sessions(args: argparse.Namespace, out: TextIO) -> int:
    if args.delete is not None:
        if args.json:
            raise UsageError("--delete prints what it deleted; it takes no --json")
        return print_sessions(args.dsn, out, delete=args.delete)
    return print_fleet(args.dsn, out, as_json=args.json)


def _db(args: argparse.Namespace, out: TextIO) -> int:
    return init_database(args.dsn, out)


def _mcp(args: argparse.Namespace, out: TextIO) -> int:
    if (args.log_dir is None) != (args.owner is None):
        raise UsageError(
            "--log-dir and --owner go together: pass both for a durable plan (the log is "
            "DIR/<owner's file>), or neither for a plan in memory"
        )
    # first, so a config is never printed for a server that cannot start (no extra, bad owner)
    from ..integrations.mcp import DEFAULT_OWNER, serve_stdio

    mcp_command.check_mcp_server(args, "--log-dir")
    if args.print_config:
        if args.log_dir is not None and not args.log_dir.exists():  # a typo, perhaps: say so
            print(
                f"dsh-todo mcp: note: --log-dir {os.path.abspath(args.log_dir)} does not exist "
                "yet; the server creates it when it starts",
                file=sys.stderr,
            )
        _print_utf8(
            out, json.dumps(mcp_command.mcp_client_config(args), indent=2, ensure_ascii=False)
        )
        return 0
    import asyncio
    import logging

    from ..core.listeners import LOGGER_NAME
    from ..errors import LogBusy
    from ..stores.owners import OwnerRegistry

    # stdout is the protocol's wire: every log record goes to stderr. The 1.x SDK warns at
    # length, on the root logger, about requests it does not know (a newer client's probe)
    # and answers them itself: only errors are worth a line, but this library's warnings too.
    logging.basicConfig(
        stream=sys.stderr, format="dsh-todo mcp: %(levelname)s: %(message)s", level=logging.ERROR
    )
    logging.getLogger(LOGGER_NAME).setLevel(logging.WARNING)
    if sys.stdin is not None and sys.stdin.isatty():
        mcp_command.serving_a_terminal()
    wait = DEFAULT_WAIT_OWNER if args.wait_owner is None else args.wait_owner
    with OwnerRegistry(args.log_dir, max_owners=None) as owners:
        owner = DEFAULT_OWNER if args.owner is None else args.owner
        serve = serve_stdio(
            allow_parallel_in_progress=args.parallel, owners=owners, owner=owner, wait_owner=wait
        )
        try:
            asyncio.run(serve)
        except LogBusy as busy:
            raise LogBusy(f"{busy}; waited {wait:g} s for it (--wait-owner)") from None
    return 0


def _serve(args: argparse.Namespace, out: TextIO) -> int:
    from ..web.server import serve

    serve(
        args.source,
        host=args.host,
        port=args.port,
        expose=args.expose,
        allow_hosts=args.allow_host,
        out=out,
        err=sys.stderr,
    )
    return 0


_COMMANDS: dict[str, Callable[[argparse.Namespace, TextIO], int]] = {
    "mcp": _mcp,
    "sessions": _sessions,
    "db": _db,
    "demo": _demo,
    "show": _show,
    "watch": _watch,
    "schema": _schema,
    "serve": _serve,
}


def _drawer(out: TextIO, ascii_only: bool) -> Callable[[Any], str]:
    style = stream_style(out)
    encoding = "ascii" if ascii_only else getattr(out, "encoding", None)
    ascii_glyphs = True if ascii_only else style["ascii"]
    return partial(render_checklist, ascii=ascii_glyphs, color=style["color"], encoding=encoding)


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


def _print_utf8(out: TextIO, text: str) -> None:
    """Print a machine format as UTF-8 whatever the locale, lone surrogates as JSON escapes.

    In JSON text a lone surrogate can only stand inside a string, where
    ``backslashreplace``'s ``\\udXXX`` is the escape that reads it back.
    """
    data = (text + "\n").encode("utf-8", "backslashreplace")
    buffer = getattr(out, "buffer", None)
    if buffer is None:  # a text-only stream, as tests pass: it takes str
        out.write(data.decode("utf-8"))
        return
    out.flush()
    buffer.write(data)
    buffer.flush()


def _text_out(out: TextIO, ascii_only: bool) -> TextIO:
    """``out`` for human text: what its encoding cannot show is escaped, never an error.

    With ``--ascii``, or an encoding without the checklist glyphs, the arrows
    and dashes become ASCII look-alikes and the rest is escaped.
    """
    encoding = getattr(out, "encoding", None)
    if ascii_only or not glyphs_encodable(encoding):
        return cast(TextIO, _Transliterated(out, "ascii" if ascii_only else encoding or "ascii"))
    if isinstance(out, io.TextIOWrapper):
        out.reconfigure(errors="backslashreplace")
    return out


class _Transliterated:
    """What ``print`` needs of a text stream, writing to another in a narrower encoding."""

    _FORMS = str.maketrans({"→": "->", "—": "-", "–": "-", "…": "...", "’": "'", "►": ">"})

    def __init__(self, out: TextIO, encoding: str) -> None:
        self._out = out
        self.encoding = encoding

    def write(self, text: str) -> int:
        shown = text.translate(self._FORMS).encode(self.encoding, "backslashreplace")
        self._out.write(shown.decode(self.encoding))
        return len(text)

    def flush(self) -> None:
        self._out.flush()

    def isatty(self) -> bool:
        return self._out.isatty()


def _clear_screen(out: TextIO) -> str:
    """The sequence that clears a terminal before a redraw; none when piped or TERM=dumb."""
    return "\x1b[H\x1b[2J" if out.isatty() and os.environ.get("TERM") != "dumb" else ""


def _reader_gone(out: TextIO) -> int:
    """End quietly when the reader closed the pipe (``| head``), with the status of SIGPIPE.

    Python flushes standard output again at exit; pointing it at the null
    device keeps that flush from failing with a message.
    """
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, out.fileno())
        os.close(null)
    except (OSError, ValueError, io.UnsupportedOperation):
        pass
    return EXIT_CLOSED_PIPE


def _warn_in_one_line(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    print(f"dsh-todo: warning: {message}", file=sys.stderr)


def _reason(error: BaseException) -> str:
    """The error's message, one line, escaped: a source named with control bytes (an ESC
    sequence, a newline) is shown, never acted on by the terminal nor split over lines."""
    encoding = getattr(sys.stderr, "encoding", None)
    if isinstance(error, OSError) and error.strerror and error.filename:
        name = error.filename
        shown = os.fsdecode(name) if isinstance(name, (str, bytes, os.PathLike)) else str(name)
        return escape_content(f"{shown}: {error.strerror}", encoding=encoding)
    text = str(error)
    if not text:
        return type(error).__name__
    # the first line only (a server's DETAIL and HINT follow it); split at \n alone, so a
    # name's \r or \u2028 stays in the message, escaped
    return escape_content(text.split("\n")[0], encoding=encoding)


if __name__ == "__main__":
    raise SystemExit(main())
