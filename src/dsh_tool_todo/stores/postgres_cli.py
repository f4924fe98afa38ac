"""The ``dsh-todo`` commands for session logs in PostgreSQL: show, watch, sessions, db init.

Kept apart from :mod:`dsh_tool_todo.cli` so that the CLI imports psycopg only
when a database URL is given. Errors are :class:`~dsh_tool_todo.errors.TodoError`
(or ``OSError``) subclasses, which the CLI prints as one line and exit 2.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Callable
from typing import Any, TextIO

from ..acp_plan import plan_update
from ..contract import EVENT_TYPE, TURN_START
from ..errors import UsageError
from ..schema import canonical_json
from . import postgres

URL_SCHEMES = ("postgresql://", "postgres://")


def is_database_url(text: str) -> bool:
    """Whether a LOG argument names a database rather than a file."""
    return text.startswith(URL_SCHEMES)


def _session(args: argparse.Namespace) -> str:
    if args.session is None:
        raise UsageError("a database URL needs --session ID (list them: dsh-todo sessions URL)")
    return postgres.check_session_id(args.session)


def _require_session(url: str, session_id: str) -> int:
    """The last seq of an existing session; a missing session is an error, as a missing file is."""
    tail = postgres.read_tail(url, session_id, limit=1)
    if not tail:
        raise UsageError(f"{postgres.server_name(url)}: no session {session_id!r}")
    last: int = tail[-1]["seq"]
    return last


def show(args: argparse.Namespace, out: TextIO, draw: Callable[[Any], str]) -> int:
    url: str = args.log
    session_id = _session(args)
    _require_session(url, session_id)
    plan = postgres.current_plan(url, session_id)
    if args.format == "json":
        print(canonical_json(plan), file=out)
    elif args.format == "acp":
        print(canonical_json(plan_update(plan or [])), file=out)
    else:
        print(draw(plan or []), file=out)
    return 0


def watch(args: argparse.Namespace, out: TextIO, draw: Callable[[Any], str], clear: str) -> int:
    url: str = args.log
    session_id = _session(args)
    last = _require_session(url, session_id)
    plan = postgres.current_plan(url, session_id)
    title = f"{session_id} ({postgres.server_name(url)})"
    print(f"{clear}{title}\n{draw(plan or [])}", file=out, flush=True)
    asyncio.run(_follow(url, session_id, last, title, out, draw, clear))
    return 0


async def _follow(
    url: str,
    session_id: str,
    last: int,
    title: str,
    out: TextIO,
    draw: Callable[[Any], str],
    clear: str,
) -> None:
    async with postgres.PostgresFollower(url, session_id, after_seq=last) as follower:
        async for event in follower:
            if event["type"] == EVENT_TYPE:
                plan = event["data"]["todos"]
            elif event["type"] == TURN_START:
                plan = None
            else:
                continue
            print(f"{clear}{title}\n{draw(plan or [])}", file=out, flush=True)


def sessions(args: argparse.Namespace, out: TextIO) -> int:
    url: str = args.dsn
    if args.delete is not None:
        session_id = postgres.check_session_id(args.delete)
        count = postgres.delete_session(url, session_id)
        if count == 0:
            raise UsageError(f"{postgres.server_name(url)}: no session {session_id!r}")
        print(f"deleted session {session_id!r}: {count} event{'' if count == 1 else 's'}", file=out)
        return 0
    found = postgres.list_sessions(url)
    if not found:
        print(f"no sessions in {postgres.server_name(url)}", file=out)
    for info in found:
        when = info.last_activity.isoformat(timespec="seconds")
        events = f"{info.events} event{'' if info.events == 1 else 's'}"
        print(f"{info.session_id}\t{events}\tlast {when}", file=out)
    return 0


def db_init(args: argparse.Namespace, out: TextIO) -> int:
    version = postgres.setup(args.dsn)
    print(f"schema version {version} ready in {postgres.server_name(args.dsn)}", file=out)
    return 0
