"""The fleet the tree streams' tests (AG-UI, AI SDK) serve: a lead and its sub-agents, keyed and
linked as the adapters key and link them (``<parent>/<agent>@<call>`` in an owner registry's
directory), in a directory or a PostgreSQL database."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from dsh_tool_todo.stores import postgres
from dsh_tool_todo.stores.jsonl import JsonlSession
from dsh_tool_todo.stores.owners import owner_file_name
from dsh_tool_todo.stores.postgres import PostgresSession
from tests._builders import one_item_plan, owner_stem, write_owner_log
from tests.stores.conftest import fresh_database
from tests.stores.postgres.test_admin import url as pg_url

LEAD = "lead"
RESEARCHER = "lead/researcher@c1"
CHECKER = "lead/researcher@c1/checker@r2"


class Store:
    """Sessions keyed as an owner registry keys them, in a directory or a database."""

    def __init__(self, source: str, name: Callable[[str], str], open_session: Callable[..., Any]):
        self.source = source
        self.name = name  # the name the reader lists a key under
        self._open = open_session

    def append(
        self,
        key: str,
        *events: tuple[str, dict[str, Any]],
        parent: str | None = None,
        call_id: str | None = None,
    ) -> None:
        link = {} if parent is None else {"parent": self.name(parent), "parent_call_id": call_id}
        with self._open(key, **link) as session:
            for kind, data in events:
                session.append(kind, data)


def jsonl_store(directory: Path) -> Store:
    """A :class:`Store` of JSONL logs in ``directory``, named as its reader lists them."""
    return Store(
        str(directory),
        owner_stem,
        lambda key, **link: JsonlSession(directory / owner_file_name(key), **link),
    )


@contextmanager
def opened_store(kind: str, directory: Path) -> Iterator[Store]:
    """A :class:`Store` of ``kind``: ``"jsonl"`` (in ``directory``) or ``"postgres"`` (a fresh
    database, dropped at the end). The ``store`` fixture of ``conftest.py`` gives both."""
    if kind == "jsonl":
        yield jsonl_store(directory)
        return
    with fresh_database() as dsn:
        postgres.setup(dsn)
        yield Store(
            pg_url(dsn), lambda key: key, lambda key, **link: PostgresSession(dsn, key, **link)
        )


def lead_with_a_helper(directory: Path) -> None:
    """JSONL logs in ``directory``: ``lead``'s, with a plan, and its sub-agent ``helper``'s
    (call ``c9``), with one of its own."""
    write_owner_log(directory, "lead", one_item_plan("Delegate"))
    write_owner_log(directory, "helper", one_item_plan("Help"), parent="lead", parent_call_id="c9")
