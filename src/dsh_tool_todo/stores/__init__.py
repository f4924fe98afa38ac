"""Where session logs live: in memory, in JSON Lines files, in PostgreSQL.

Every store speaks one session protocol (:class:`dsh_tool_todo.protocols.StoreSession`):
``append`` returns the recorded event with its ``seq``, ``subscribe`` registers a
listener called in log order, ``latest`` reads the newest event of given types
cheaply (how a host resumes a projection), and ``close`` releases the writer's
claim. Each store module imports its own dependencies only when imported.

Viewers read stored logs through one protocol,
:class:`dsh_tool_todo.protocols.LogReader`; :func:`open_reader` is the one
place that turns a directory or a ``postgresql://`` URL into a store's reader.
:func:`current_plan` and :func:`follow_plans` read one session's plan from a JSONL
file or from a database URL with a session id (what ``dsh-todo show`` and
``watch`` draw); :func:`print_sessions` and :func:`init_database` run
``dsh-todo sessions`` and ``db init``. They are the only code here that tells a
``postgresql://`` URL from a path.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TextIO

from ..errors import UsageError

if TYPE_CHECKING:
    from pathlib import Path

    from ..core.health import Signal
    from ..core.projection import Plan
    from ..protocols import LogReader

__all__ = [
    "current_plan",
    "follow_plans",
    "init_database",
    "open_reader",
    "print_fleet",
    "print_sessions",
    "turn_signals",
]

POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def open_reader(target: str | os.PathLike[str]) -> LogReader:
    """The reader of the logs ``target`` names: a ``postgresql://`` (or ``postgres://``)
    URL, or a directory of JSONL logs.

    Nothing is read or connected here; a backend's driver is imported only
    when its reader is asked for.
    """
    text = _source(target)
    if text.startswith(POSTGRES_SCHEMES):
        from .postgres import PostgresReader

        return PostgresReader(text)
    from pathlib import Path

    from .jsonl import JsonlReader

    return JsonlReader(Path(text))


def current_plan(target: str | os.PathLike[str], session: str | None = None) -> Plan:
    """The plan now in a JSONL log, or in ``session`` of the database a
    ``postgresql://`` URL names; ``None`` if no plan was written since the last turn."""
    text = _source(target)
    if _on_database(text, session):
        from .postgres import admin

        return admin.show_plan(text, session)
    from pathlib import Path

    from .jsonl import current_plan as jsonl_plan

    return jsonl_plan(_existing(Path(text)))


def turn_signals(target: str | os.PathLike[str], session: str | None = None) -> list[Signal]:
    """The plan-health signals of the current turn of a JSONL log, or of ``session`` in
    the database a URL names (:mod:`dsh_tool_todo.core.health`): what ``show`` and ``watch``
    print under the plan. Reads back from the end to the turn's start, at most
    ``fleet.MAX_TURN_WRITES`` writes."""
    import asyncio

    from ..core.health import turn_health
    from ..plans.fleet import turn_events

    text = _source(target)
    if _on_database(text, session):
        from .postgres import PostgresReader

        reader = PostgresReader(text)

        async def read() -> list[Any]:
            try:
                return await turn_events(reader, _named(session))
            finally:
                await reader.aclose()

        return turn_health(asyncio.run(read()))
    from .jsonl._tail import read_tail

    class FileTail:
        async def tail(
            self, name: str, *, before: int | None, limit: int, types: Any = None
        ) -> Any:
            return read_tail(text, before, limit, types)

    return turn_health(asyncio.run(turn_events(FileTail(), text)))


def _named(session: str | None) -> str:
    if session is None:
        raise UsageError("a database URL needs --session ID (list them: dsh-todo sessions URL)")
    return session


def follow_plans(
    target: str | os.PathLike[str],
    session: str | None = None,
    *,
    wait: Callable[[str], None] | None = None,
    interval: float = 0.2,
) -> tuple[str, Iterator[Plan]]:
    """A title, and the plan now and after each change, forever.

    A missing log or session is an error before anything is drawn, unless
    ``wait`` is given: then ``wait`` is told what is awaited, and the plans
    start once it appears. A JSONL log is polled every ``interval`` seconds; a
    database pushes each change.
    """
    text = _source(target)
    if _on_database(text, session):
        from .postgres import admin

        return admin.follow_plans(text, session, wait=wait)
    import time
    from pathlib import Path

    from .jsonl import follow_plan

    log = Path(text)
    if wait is not None and not log.exists():
        wait(str(log))
        while not log.exists():
            time.sleep(interval)
    return str(log), follow_plan(_existing(log), interval=interval, sleep=time.sleep)


def print_sessions(target: str, out: TextIO, *, delete: str | None = None) -> int:
    """Print one line per session of the database ``target`` names; with
    ``delete``, delete that session instead. Only a database has sessions."""
    target = _source(target)
    if os.path.isdir(target):
        raise UsageError(
            f"{target}: --delete goes with a database URL; in a directory, delete the file"
        )
    from .postgres import admin

    return admin.print_sessions(target, out, delete=delete)


def print_fleet(target: str, out: TextIO, *, as_json: bool = False) -> int:
    """``dsh-todo sessions SOURCE``: every session of a directory or database as a tree of
    sub-agents (:mod:`dsh_tool_todo.plans.fleet`), as text or as JSON.

    A database session whose id no URL can carry (a control byte, say) is left out of the
    reader's list; an operator still sees it here, after the tree (``unlisted`` in JSON),
    escaped, so that ``--delete`` can remove it.
    """
    import asyncio
    import json

    from ..plans.checklist import escape_content
    from ..plans.fleet import FleetNode, fleet_json, read_fleet, render_tree

    target = _source(target)
    unlisted: list[str] = []
    if _conninfo(target) or target.startswith(POSTGRES_SCHEMES):
        from .postgres import PostgresReader, admin

        admin.check_store(target)
        reader: LogReader = PostgresReader(target)
        every = admin.session_ids(target)
        why = "an id no URL can carry: not in the tree; --delete removes it"
    else:
        reader = open_reader(target)
        every = _log_names(target)
        why = "a file name no URL can carry: not in the tree"

    async def read() -> list[Any]:
        try:
            return await read_fleet(reader)
        finally:
            await reader.aclose()

    roots: list[FleetNode] = asyncio.run(read())
    listed: set[str] = set()
    stack = list(roots)
    while stack:
        node = stack.pop()
        if node.visible:
            listed.add(node.key)
        stack.extend(node.children)
    unlisted = [name for name in every if name not in listed]
    if as_json:
        document = {
            "source": _shown_source(target),
            "sessions": fleet_json(roots),
            "unlisted": unlisted,
        }
        out.write(json.dumps(document) + "\n")
        return 0
    if not roots and not unlisted:
        print(f"no sessions in {_shown_source(target)}", file=out)
        return 0
    encoding = getattr(out, "encoding", None)
    if roots:
        print(render_tree(roots, encoding=encoding), file=out)
    for name in unlisted:
        shown = escape_content(name, encoding=encoding)
        print(f"{shown}\t({why})", file=out)
    return 0


def _log_names(directory: str) -> list[str]:
    """The stem of every regular ``*.jsonl`` file in ``directory``, sorted: the logs the
    reader leaves out (a name no URL can carry) are told apart from these."""
    from .jsonl.reader import SUFFIX

    with os.scandir(directory) as entries:
        return sorted(
            entry.name[: -len(SUFFIX)]
            for entry in entries
            if entry.name.endswith(SUFFIX)
            and not entry.name.startswith(".")
            and entry.is_file(follow_symlinks=False)
        )


def _conninfo(target: str) -> bool:
    """A libpq ``key=value`` conninfo (what ``sessions`` took before it read directories)."""
    return "=" in target and not target.startswith(POSTGRES_SCHEMES) and not os.path.isdir(target)


def _shown_source(target: str) -> str:
    if target.startswith(POSTGRES_SCHEMES) or _conninfo(target):
        from .postgres._core import server_name

        return server_name(target)  # never the password
    return target


def init_database(target: str, out: TextIO) -> int:
    """Create or upgrade the schema of the database ``target`` names, and say its version."""
    from .postgres import admin

    return admin.init_database(target, out)


def _source(target: str | os.PathLike[str]) -> str:
    """``target`` as text; :class:`UsageError` when it is empty, which would otherwise be read
    as the current directory (say ``.`` for that)."""
    text = os.fspath(target)
    if not text:
        raise UsageError(
            "the source is empty: name a JSONL log or directory (`.` for the current one) "
            "or a postgresql:// URL"
        )
    return text


def _on_database(target: str, session: str | None) -> bool:
    if target.startswith(POSTGRES_SCHEMES):
        return True
    if session is not None:
        raise UsageError("--session goes with a postgresql:// URL, not a file")
    return False


def _existing(log: Path) -> Path:
    """``log`` if something is there; the readers refuse what is not a regular file."""
    try:
        log.stat()
    except FileNotFoundError:
        raise FileNotFoundError(f"{log}: no such session log") from None
    return log
