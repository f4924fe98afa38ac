"""``dsh-todo sessions`` and ``db``: every session of a source as a tree of sub-agents, a
database session deleted, old sessions pruned, a database set up; and the default place a
command reads when given no source. The source is opened through the picker; what it answers
is printed here."""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING, Any, TextIO

from ..errors import UsageError
from ..plans.checklist import escape_content
from ..stores import open_database, open_fleet, prune_logs
from ._output import shown_path

if TYPE_CHECKING:
    from ..plans.fleet import FleetNode

__all__: list[str] = []

NOT_MADE_YET = (
    "the default place {place} ({named}) does not exist yet: no plans were recorded there. "
    "`dsh-todo demo` records one there, and so does an agent run with {variable} naming it or "
    "given it as owners=; or name a SOURCE"
)


def source_or_home(source: str | None, *, awaited: bool = False) -> str:
    """``source``, or with none the default place (``DSH_TODO_HOME``, else the per-user state
    directory). A default directory not made yet is refused, saying how plans get there, unless
    ``awaited`` (``watch --wait --session KEY``: the log is waited for, directory and all)."""
    if source is not None:
        return source
    from ..stores._home import HOME_VARIABLE, default_home, home_not_made_yet

    place = default_home()
    if not awaited and home_not_made_yet(place):
        named = home_named()
        raise UsageError(NOT_MADE_YET.format(place=place, named=named, variable=HOME_VARIABLE))
    check_home(place)
    return place


def check_home(place: str, *, otherwise: str = "name a SOURCE") -> None:
    """Refuse a default place that is no directory (a file, a symlink to nothing), saying
    whose it is: ``DSH_TODO_HOME``'s or the per-user state directory."""
    from ..stores._home import HOME_VARIABLE, is_database

    if is_database(place) or os.path.isdir(place) or not os.path.lexists(place):
        return
    if os.path.islink(place) and not os.path.exists(place):
        what = f"a symlink to {os.readlink(place)}, which does not exist"
    else:
        what = "not a directory"
    raise UsageError(
        f"the default place {place} ({home_named()}) is {what}: plans are kept in a directory "
        f"of logs; point {HOME_VARIABLE} at one, or {otherwise}"
    )


def home_named() -> str:
    """``DSH_TODO_HOME``, or the per-user state directory: where the default place comes from."""
    from ..stores._home import home_named

    return home_named()


def sessions(args: argparse.Namespace, out: TextIO) -> int:
    if args.prune or args.older_than is not None or args.dry_run:
        return _prune(args, out)
    source = source_or_home(args.dsn)
    if args.delete is not None:
        if args.json:
            raise UsageError("--delete prints what it deleted; it takes no --json")
        return _delete(source, args.delete, out)
    return _print_fleet(source, out, as_json=args.json)


def db(args: argparse.Namespace, out: TextIO) -> int:
    """``db init``: create or upgrade the schema; says the version."""
    database = open_database(args.dsn)
    version = database.setup()
    print(f"schema version {version} ready in {database.name}", file=out)
    return 0


def _delete(target: str, session_id: str, out: TextIO) -> int:
    """``sessions --delete``: delete a database session, its id escaped as the checklist
    escapes content. Only a database has sessions to delete."""
    database = open_database(target, deleting=True)
    count = database.delete_session(session_id)
    shown = escape_content(session_id, encoding=getattr(out, "encoding", None))
    if count == 0:
        raise UsageError(f"{database.name}: no session '{shown}'")
    print(f"deleted session '{shown}': {count} event{'' if count == 1 else 's'}", file=out)
    return 0


def _prune(args: argparse.Namespace, out: TextIO) -> int:
    """``sessions --prune --older-than DAYS``: delete the sessions last written over DAYS days
    ago, each named (escaped as the checklist escapes content) with its last write."""
    if not args.prune:
        raise UsageError("--older-than and --dry-run go with --prune")
    if args.older_than is None:
        raise UsageError(
            "--prune needs --older-than DAYS: the sessions last written over DAYS "
            "days ago are deleted"
        )
    if args.delete is not None or args.json:
        raise UsageError("--prune prints what it deleted; it takes no --delete or --json")
    where, pruned, left = prune_logs(
        source_or_home(args.dsn), args.older_than, dry_run=args.dry_run
    )
    where = shown_path(where, out)
    encoding = getattr(out, "encoding", None)
    verb = "would delete" if args.dry_run else "deleted"
    for name, last in pruned:
        shown = escape_content(name, encoding=encoding)
        print(
            f"{verb} session '{shown}' (last written {last.isoformat(timespec='seconds')})",
            file=out,
        )
    leave = "would leave" if args.dry_run else "left"
    for name, last, why in left:  # never skipped in silence: which, and why
        shown = escape_content(name, encoding=encoding)
        reason = escape_content(why, encoding=encoding)
        written = last.isoformat(timespec="seconds")
        print(f"{leave} session '{shown}' (last written {written}): {reason}", file=out)
    age = f"last written over {args.older_than:g} day{'' if args.older_than == 1 else 's'} ago"
    kept = f"; {len(left)} left, named above" if left else ""
    if not pruned and not left:
        print(f"no session in {where} was {age}", file=out)
    else:
        count = f"{len(pruned)} session{'' if len(pruned) == 1 else 's'}"
        print(f"{verb} {count} {age} in {where}{kept}", file=out)
    return 0


def _print_fleet(target: str, out: TextIO, *, as_json: bool = False) -> int:
    """:func:`_show_fleet`, without the cyclic garbage collector.

    The tree's nodes live until the command ends and hold no cycles: the collector would walk
    all of them again at each full collection and free nothing (half a second of the seven
    100,000 sessions take). What is read from each log, and the JSON of each root, is let go
    once shown.
    """
    import gc

    collecting = gc.isenabled()
    gc.disable()
    try:
        return _show_fleet(target, out, as_json=as_json)
    finally:
        if collecting:
            gc.enable()


def _show_fleet(target: str, out: TextIO, *, as_json: bool = False) -> int:
    """Every session of a directory or database as a tree of sub-agents
    (:mod:`dsh_tool_todo.plans.fleet`), as text or as JSON.

    A session whose name no URL can carry (a control byte, say) is left out of the reader's
    list; an operator still sees it here, after the tree (``unlisted`` in JSON), escaped, so
    that ``--delete`` can remove it from a database.
    """
    import asyncio
    import json

    from ..plans.fleet import fleet_json, read_fleet, render_tree

    reader, every, database = open_fleet(target)
    if database is not None:
        why = "an id no URL can carry: not in the tree; --delete removes it"
    else:
        why = "a file name no URL can carry: not in the tree"

    async def read() -> list[Any]:
        try:
            return await read_fleet(reader)
        finally:
            await reader.aclose()

    roots: list[FleetNode] = asyncio.run(read())
    listed = _listed(roots)
    unlisted = [name for name in every if name not in listed]
    shown = target if database is None else database.name  # never the password
    if as_json:
        # the same bytes as one json.dumps of the document, written a few hundred roots at a
        # time: a fleet of 100,000 sessions is never one string in memory
        out.write(f'{{"source": {json.dumps(shown)}, "sessions": [')
        for start in range(0, len(roots), _ROOTS_AT_ONCE):
            trees = json.dumps(fleet_json(roots[start : start + _ROOTS_AT_ONCE]))
            out.write((", " if start else "") + trees[1:-1])  # the list's items, unbracketed
        out.write(f'], "unlisted": {json.dumps(unlisted)}}}\n')
        return 0
    if not roots and not unlisted:
        print(f"no sessions in {shown_path(shown, out)}", file=out)
        return 0
    encoding = getattr(out, "encoding", None)
    for root in roots:  # a tree at a time: the text of 100,000 sessions is never one string
        print(render_tree([root], encoding=encoding), file=out)
    for name in unlisted:
        print(f"{escape_content(name, encoding=encoding)}\t({why})", file=out)
    return 0


_ROOTS_AT_ONCE = 256


def _listed(roots: list[FleetNode]) -> set[str]:
    """The keys of every visible node of the tree."""
    listed: set[str] = set()
    stack = list(roots)
    while stack:
        node = stack.pop()
        if node.visible:
            listed.add(node.key)
        stack.extend(node.children)
    return listed
