"""``dsh-todo sessions`` and ``db``: every session of a source as a tree of sub-agents, a
database session deleted, a database set up. The source is opened through the picker; what
it answers is printed here."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any, TextIO

from ..errors import UsageError
from ..plans.checklist import escape_content
from ..stores import open_database, open_fleet

if TYPE_CHECKING:
    from ..plans.fleet import FleetNode

__all__: list[str] = []


def sessions(args: argparse.Namespace, out: TextIO) -> int:
    if args.delete is not None:
        if args.json:
            raise UsageError("--delete prints what it deleted; it takes no --json")
        return _delete(args.dsn, args.delete, out)
    return _print_fleet(args.dsn, out, as_json=args.json)


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


def _print_fleet(target: str, out: TextIO, *, as_json: bool = False) -> int:
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
        document = {"source": shown, "sessions": fleet_json(roots), "unlisted": unlisted}
        out.write(json.dumps(document) + "\n")
        return 0
    if not roots and not unlisted:
        print(f"no sessions in {shown}", file=out)
        return 0
    encoding = getattr(out, "encoding", None)
    if roots:
        print(render_tree(roots, encoding=encoding), file=out)
    for name in unlisted:
        print(f"{escape_content(name, encoding=encoding)}\t({why})", file=out)
    return 0


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
