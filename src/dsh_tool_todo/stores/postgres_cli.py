"""The ``dsh-todo`` commands for session logs in PostgreSQL: show, watch, sessions, db init.

Kept apart from :mod:`dsh_tool_todo.cli` so that the CLI imports psycopg only
when a database URL is given. ``show`` and ``watch`` get their plans here and
draw them as they draw a file's. Errors are :class:`~dsh_tool_todo.errors.TodoError`
(or ``OSError``) subclasses, which the CLI prints as one line and exit 2.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, TextIO

from ..contract import EVENT_TYPE, TURN_START
from ..errors import UsageError
from . import postgres

if TYPE_CHECKING:
    from ..model import TodoItem


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


def current_plan(args: argparse.Namespace) -> list[TodoItem] | None:
    """``show``: the plan of the session ``--session`` names in the database ``LOG`` names."""
    url: str = args.log
    session_id = _session(args)
    _require_session(url, session_id)
    return postgres.current_plan(url, session_id)


def follow_plans(
    args: argparse.Namespace, *, wait: Callable[[str], None] | None = None
) -> tuple[str, Iterator[list[TodoItem] | None]]:
    """``watch``: a title, and the session's plan now and after each change, pushed by NOTIFY.

    The session is checked before this returns, so a bad URL or session fails
    before anything is drawn; the follower reconnects by itself afterwards.
    With ``wait``, a session with no rows yet is no error: ``wait`` is told
    what is awaited, and the plans start with its first row.
    """
    url: str = args.log
    session_id = _session(args)
    title = f"{session_id} ({postgres.server_name(url)})"
    if wait is not None and not postgres.read_tail(url, session_id, limit=1):
        wait(f"session {session_id!r} in {postgres.server_name(url)}")
        return title, _plans(url, session_id, -1, None, first=False)
    last = _require_session(url, session_id)
    plan = postgres.current_plan(url, session_id)
    return title, _plans(url, session_id, last, plan)


def _plans(
    url: str, session_id: str, last: int, plan: list[TodoItem] | None, *, first: bool = True
) -> Iterator[list[TodoItem] | None]:
    if first:
        yield plan
    loop = asyncio.new_event_loop()
    follower = postgres.PostgresFollower(url, session_id, after_seq=last)
    try:
        while True:
            try:
                event = loop.run_until_complete(follower.__anext__())
            except StopAsyncIteration:
                return
            if event["type"] == EVENT_TYPE:
                yield event["data"]["todos"]
            elif event["type"] == TURN_START:
                yield None
    finally:
        loop.run_until_complete(follower.aclose())
        loop.close()


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
