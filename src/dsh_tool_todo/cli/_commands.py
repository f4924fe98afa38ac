"""``dsh-todo demo``, ``schema``, ``mcp`` and ``serve``: the commands that run the tool itself
(through the reference host, an MCP server or the web view) rather than read a log."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from typing import TextIO

from ..errors import UsageError
from . import _mcp as mcp_command
from ._output import drawer, print_utf8, shown_path, text_out
from ._parser import DEFAULT_WAIT_OWNER

__all__: list[str] = []


def demo(args: argparse.Namespace, out: TextIO) -> int:
    from ._demo import demo_home, fresh_log, next_hint, paced, removed_if_empty, run_demo

    if not args.serve:
        for flag in ("open", "host", "port"):
            if getattr(args, flag) not in (None, False):
                raise UsageError(f"--{flag} goes with --serve (the demo's own web view)")
    if args.log is not None and args.log.exists():
        raise FileExistsError(f"{args.log} already exists: the demo writes a new log, pick another")
    if args.log is not None:
        args.log.parent.mkdir(parents=True, exist_ok=True)  # as the default place is made
    text = text_out(out, args.ascii)
    draw = drawer(text, args.ascii)
    if args.serve:
        from ._demo_serve import serve_demo

        serve_demo(args, text, draw)
        return 0
    log = args.log or fresh_log(demo_home())
    go_on = (lambda: True) if not args.pace else paced(args.pace)
    with removed_if_empty(log):
        run_demo(log, text, parallel=args.parallel, draw=draw, go_on=go_on)
    print(shown_path(next_hint(log), text), file=text)  # runnable, unless it names a control
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
    # first, so a config is never printed for a server that cannot start (no extra, bad owner)
    from ..integrations.mcp import DEFAULT_OWNER, serve_stdio

    server = mcp_command.resolve_mcp_server(args, DEFAULT_OWNER)
    if args.print_config:
        if server.log_dir is not None and not server.log_dir.exists():  # a typo, perhaps
            print(
                f"dsh-todo mcp: note: {shown_path(server.named)} does not exist yet; the server "
                "creates it when it first records",
                file=sys.stderr,
            )
        config = mcp_command.mcp_client_config(server, args.client or "claude")
        print_utf8(out, json.dumps(config, indent=2, ensure_ascii=False))
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
    wait = DEFAULT_WAIT_OWNER if server.wait_owner is None else server.wait_owner
    own = server.owner is None  # a log of this server's own, made by its first call
    if own:
        server.owner = mcp_command.fresh_owner(DEFAULT_OWNER)
    # explicit even in memory: serve_stdio given no registry would follow DSH_TODO_HOME
    with OwnerRegistry(server.log_dir, max_owners=None) as owners:
        serve = serve_stdio(
            allow_parallel_in_progress=server.parallel,
            owners=owners,
            owner=server.owner,
            wait_owner=wait,
            hold_owner=not own,
        )
        try:
            asyncio.run(serve)
        except LogBusy as busy:
            raise LogBusy(
                f"{busy}; waited {wait:g} s for it (--wait-owner); a client that runs at the "
                "same time as another needs an --owner of its own"
            ) from None
    return 0


def _holds_no_log(source: str) -> bool:
    """A directory with no ``*.jsonl`` in it (a database is not looked into here)."""
    try:
        with os.scandir(source) as entries:
            return not any(entry.name.endswith(".jsonl") for entry in entries)
    except OSError:  # not a directory: the server says what it is
        return False


def serve(args: argparse.Namespace, out: TextIO) -> int:
    from ..web.server import serve
    from ._sources import source_or_home

    source = source_or_home(args.source)
    note = None
    if _holds_no_log(source):
        demo_log = shlex.quote(os.path.join(source, "demo.jsonl"))
        note = shown_path(  # one line, whatever the directory's name holds
            f"dsh-todo serve: note: {source} holds no session log yet; the view shows each one "
            f"as it appears. An agent records here with owners={source!r} or DSH_TODO_HOME="
            f"{shlex.quote(source)}; `dsh-todo demo --log {demo_log}` writes one now"
        )
    serve(
        source,
        host=args.host,
        port=args.port,
        expose=args.expose,
        allow_hosts=args.allow_host,
        out=out,
        err=sys.stderr,
        note=note,
        requests=args.requests,
    )
    return 0
