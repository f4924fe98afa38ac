"""The pieces of ``dsh-todo mcp`` that also serve ``stdio_config`` and the demo's hint: this
``dsh-todo`` by absolute paths, an MCP client's configuration in each client's shape, where
the server records, and the checks made before a configuration is printed or a server
started."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from ..errors import UsageError

__all__ = [
    "CLIENTS",
    "check_mcp_server",
    "fresh_owner",
    "log_dir_flag",
    "mcp_client_config",
    "own_command",
    "resolve_mcp_server",
    "serving_a_terminal",
]

CLIENTS = ("claude", "cursor", "vscode", "zed")
"""The shapes ``--print-config --client`` prints: Claude Desktop, Claude Code (``.mcp.json``)
and Cursor read ``mcpServers``; VS Code ``servers`` with a ``type``; Zed ``context_servers``."""

_ELSEWHERE = "with --log-dir DIR (or DSH_TODO_HOME), or pass --in-memory"


def resolve_mcp_server(args: argparse.Namespace, default_owner: str) -> argparse.Namespace:
    """``dsh-todo mcp``'s flags checked together, and where its server records: ``--log-dir``,
    else the default place (``DSH_TODO_HOME``, else the per-user state directory), or memory
    with ``--in-memory``. The namespace :func:`mcp_client_config` and the server read:
    ``parallel``, ``log_dir`` (``None``: memory), ``owner``, ``wait_owner``, and ``named``,
    how a message names the directory."""
    if args.in_memory and (args.log_dir is not None or args.owner is not None):
        raise UsageError(
            "--in-memory keeps the plan in the server's memory, recorded nowhere: leave out "
            "--log-dir and --owner, which name where it is recorded"
        )
    if args.client is not None and not args.print_config:
        raise UsageError(
            "--client chooses the shape of the configuration --print-config prints: pass "
            "--print-config too"
        )
    # A recorded server named no owner gets a log of its own each time it starts, as a client
    # starts one per conversation: two at once never wait for each other, and none resumes
    # another conversation's plan. A named owner's log is resumed (and waited for).
    server = argparse.Namespace(
        parallel=args.parallel,
        log_dir=args.log_dir,
        owner=args.owner,
        wait_owner=args.wait_owner,
        named=f"--log-dir {args.log_dir}",
    )
    if args.in_memory:
        server.log_dir = None
        server.owner = default_owner
        return server
    if args.log_dir is not None:
        check_mcp_server(server, "--log-dir")
        return server
    from ..stores._home import HOME_VARIABLE, default_home, home_from_environment

    home = default_home()
    if not _in_a_directory(home):
        raise UsageError(
            f"{HOME_VARIABLE} names a PostgreSQL database, and dsh-todo mcp records to a "
            "directory: a server holds its owner's log while it runs and a second one waits "
            "for it (--wait-owner), which a database session does not do. Pass --log-dir DIR "
            "or --in-memory"
        )
    server.log_dir = Path(home)
    server.named = f"the default place {home}" + (
        f" ({HOME_VARIABLE})" if home_from_environment() is not None else ""
    )
    if server.owner is not None:
        _check_owner(server.owner)
    _check_directory(server.log_dir, server.named, elsewhere=_ELSEWHERE)
    return server


def fresh_owner(default_owner: str) -> str:
    """The owner of a server started with no ``--owner``: the time it started and its process,
    so its log sorts after every earlier one (``dsh-todo watch`` with no ``--session`` shows
    the newest)."""
    import time

    return f"{default_owner}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"


def check_mcp_server(args: argparse.Namespace, flag: str) -> None:
    """Refuse, before a config is printed or a server started, what the server would refuse
    (an owner no file can be named after) or fail on (a log directory it cannot make)."""
    if args.owner is not None:
        _check_owner(args.owner)
    if args.log_dir is not None:
        _check_directory(Path(args.log_dir), f"{flag} {args.log_dir}")


def _check_owner(owner: str) -> None:
    from ..stores.owners import owner_file_name

    owner_file_name(owner)


def _check_directory(log_dir: Path, named: str, *, elsewhere: str = "") -> None:
    if log_dir.exists() and not log_dir.is_dir():
        raise UsageError(
            f"{named}: is not a directory; name a directory "
            + (elsewhere if elsewhere else "(it is created if missing)")
        )
    parent = Path(os.path.abspath(log_dir))
    while not parent.exists():
        parent = parent.parent
    if not (parent.is_dir() and os.access(parent, os.W_OK | os.X_OK)):
        raise UsageError(
            f"{named}: cannot be written: {parent} is not a directory this user can write "
            f"to; name another{f' {elsewhere}' if elsewhere else ''}"
        )


def log_dir_flag(text: str) -> Path:
    if not text.strip():
        raise argparse.ArgumentTypeError(
            "is empty: name the directory of the session logs (created if missing)"
        )
    if not _in_a_directory(text):
        # Path() would fold a URL's // and make a directory named after its scheme
        raise argparse.ArgumentTypeError(
            "names a database: dsh-todo mcp records to a directory of session logs (a second "
            "server on an owner waits for its log, which a database session cannot do)"
        )
    return Path(text).expanduser()


def _in_a_directory(place: str) -> bool:
    """Whether the store picker keeps the plans of ``place`` in a directory, not a database
    (it alone tells a URL from a path); nothing is opened or made here."""
    from ..errors import MissingExtra
    from ..stores import open_owners

    try:
        return open_owners(place, max_owners=None).directory is not None
    except MissingExtra:  # only a database needs an extra
        return False
    except UsageError:  # a directory the picker refuses (a file, say): refused when checked
        return True


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


def mcp_client_config(args: argparse.Namespace, client: str = "claude") -> dict[str, Any]:
    """What an MCP client reads to start this server, in ``client``'s shape (:data:`CLIENTS`):
    the plan recorded in ``args.log_dir`` under ``args.owner``, or, with no ``log_dir``, kept
    in the server's memory.

    Absolute paths throughout: a client runs the command without this environment's
    ``bin`` on its PATH, without a shell to expand ``~``, from a directory of its own.
    """
    command, *server_args = [*own_command(), "mcp"]
    if args.parallel:
        server_args.append("--parallel")
    if args.log_dir is None:
        # said, not left to the default: the server run without it records to the default place
        server_args.append("--in-memory")
    else:
        server_args += ["--log-dir", os.path.abspath(args.log_dir)]
        if args.owner is not None:
            server_args += ["--owner", args.owner]
    if args.wait_owner is not None:
        server_args += ["--wait-owner", f"{args.wait_owner:g}"]
    if client == "vscode":
        return {"servers": {"todo": {"type": "stdio", "command": command, "args": server_args}}}
    if client == "zed":
        return {"context_servers": {"todo": {"command": command, "args": server_args, "env": {}}}}
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
