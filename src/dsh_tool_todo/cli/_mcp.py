"""The pieces of ``dsh-todo mcp`` that also serve ``stdio_config`` and the demo's hint: this
``dsh-todo`` by absolute paths, an MCP client's configuration, the checks made before one
is printed or a server started."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from ..errors import UsageError

__all__ = [
    "check_mcp_server",
    "log_dir_flag",
    "mcp_client_config",
    "own_command",
    "serving_a_terminal",
]


def check_mcp_server(args: argparse.Namespace, flag: str) -> None:
    """Refuse, before a config is printed or a server started, what the server would refuse
    (an owner no file can be named after) or fail on (a log directory it cannot make)."""
    from ..stores.owners import owner_file_name

    if args.owner is not None:
        owner_file_name(args.owner)
    if args.log_dir is None:
        return
    log_dir = Path(args.log_dir)
    if log_dir.exists() and not log_dir.is_dir():
        raise UsageError(
            f"{flag} {log_dir}: is not a directory; name a directory (it is created if missing)"
        )
    parent = Path(os.path.abspath(log_dir))
    while not parent.exists():
        parent = parent.parent
    if not (parent.is_dir() and os.access(parent, os.W_OK | os.X_OK)):
        raise UsageError(
            f"{flag} {log_dir}: cannot be written: {parent} is not a directory this user can "
            "write to; name another"
        )


def log_dir_flag(text: str) -> Path:
    if not text.strip():
        raise argparse.ArgumentTypeError(
            "is empty: name the directory of the session logs (created if missing)"
        )
    return Path(text).expanduser()


def serving_a_terminal() -> None:
    """Run by hand: say what the silence is, and let Ctrl-C end it.

    The SDK reads stdin in a worker thread that no cancellation reaches, so Ctrl-C
    would wait for the next line; ending the process at once loses nothing: every
    acknowledged call is already written, and the kernel releases the log's lock.
    """
    import signal

    print(
        "dsh-todo mcp: waiting for an MCP client's messages on stdin (JSON-RPC, one per "
        "line). A client starts this command itself: `dsh-todo mcp --print-config` prints "
        "its configuration. Ctrl-C or Ctrl-D stops it.",
        file=sys.stderr,
        flush=True,
    )
    signal.signal(signal.SIGINT, lambda signum, frame: os._exit(0))


def mcp_client_config(args: argparse.Namespace) -> dict[str, Any]:
    """What an MCP client (Claude Desktop, Cursor, Claude Code) reads to start this server.

    Absolute paths throughout: a client runs the command without this environment's
    ``bin`` on its PATH, without a shell to expand ``~``, from a directory of its own.
    """
    command, *server_args = [*own_command(), "mcp"]
    if args.parallel:
        server_args.append("--parallel")
    if args.log_dir is not None:
        server_args += [
            "--log-dir",
            str(Path(os.path.abspath(args.log_dir))),
            "--owner",
            args.owner,
        ]
    if args.wait_owner is not None:
        server_args += ["--wait-owner", f"{args.wait_owner:g}"]
    return {"mcpServers": {"todo": {"command": command, "args": server_args}}}


def own_command() -> list[str]:
    """This ``dsh-todo`` by absolute paths: the script of this environment, or, where it is
    not installed as a script (run from a checkout), this Python running the module."""
    import sysconfig

    script = Path(sysconfig.get_path("scripts")) / (
        "dsh-todo.exe" if os.name == "nt" else "dsh-todo"
    )
    if os.access(script, os.X_OK):
        return [str(script)]
    return [sys.executable, "-m", "dsh_tool_todo"]
