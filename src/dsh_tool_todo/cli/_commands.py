"""``dsh-todo demo``, ``schema``, ``mcp`` and ``serve``: the commands that run the tool itself
(through the reference host, an MCP server or the web view) rather than read a log."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from pathlib import Path
from typing import TextIO

from ..errors import UsageError
from . import _mcp as mcp_command
from ._output import drawer, print_utf8, text_out
from ._parser import DEFAULT_WAIT_OWNER

__all__: list[str] = []


def demo(args: argparse.Namespace, out: TextIO) -> int:
    import tempfile  # here, not at import: it brings shutil and the compression modules

    from ._demo import run_demo

    log = args.log or Path(tempfile.mkdtemp(prefix="dsh-todo-")) / "session.jsonl"
    if log.exists():
        raise FileExistsError(f"{log} already exists: the demo writes a new log, pick another")
    text = text_out(out, args.ascii)
    run_demo(log, text, parallel=args.parallel, draw=drawer(text, args.ascii))
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


def schema(args: argparse.Namespace, out: TextIO) -> int:
    from ..core.definition import definition_json
    from ..core.options import PLUGIN_NAME
    from ..host import Host
    from ..host.loader import discover_plugins

    options = {PLUGIN_NAME: {"allowParallelInProgress": args.parallel}}
    tool = Host(discover_plugins(), options, projections=False).tools["todo_write"]
    print_utf8(out, definition_json(tool, args.format))
    return 0


def mcp(args: argparse.Namespace, out: TextIO) -> int:
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
        print_utf8(
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


def serve(args: argparse.Namespace, out: TextIO) -> int:
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
