"""The JSONL reader's rows handed on one at a time with their first tail page (what
``dsh-todo sessions`` reads, ``JsonlReader.sessions_paged``) are the rows of its list and the
pages of its tail, log by log, for logs of every shape."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Any

import pytest

from dsh_tool_todo.core.contract import SESSION_END_EVENT_TYPE
from dsh_tool_todo.core.projection import PLAN_EVENTS
from dsh_tool_todo.errors import InvalidLog, StoreUnavailable
from dsh_tool_todo.protocols import SessionSummary, TailPage
from dsh_tool_todo.stores.jsonl import JsonlReader
from tests.stores.jsonl.fleet_logs import write_fleet

TYPES = (*PLAN_EVENTS, SESSION_END_EVENT_TYPE)
Paged = list[tuple[SessionSummary, TailPage | InvalidLog | None]]


async def read_both(
    directory: Path, query: str = "", limit: int = 1000
) -> tuple[list[SessionSummary], Paged, dict[str, TailPage | InvalidLog]]:
    reader = JsonlReader(directory)
    try:
        listed, _ = await reader.sessions(query, limit)
        paged = [item async for item in reader.sessions_paged(query, limit, types=TYPES, page=200)]
        pages: dict[str, TailPage | InvalidLog] = {}
        for row, _ in paged:
            try:
                pages[row.name] = await reader.tail(row.name, before=None, limit=200, types=TYPES)
            except InvalidLog as error:
                pages[row.name] = error
        return listed, paged, pages
    finally:
        await reader.aclose()


def test_each_row_and_its_first_page_are_what_the_list_and_the_tail_give(tmp_path: Path) -> None:
    write_fleet(tmp_path)
    listed, paged, pages = asyncio.run(read_both(tmp_path))

    assert [row for row, _ in paged] == listed
    apart = set()
    for row, first in paged:
        expected: Any = pages[row.name]
        if first is None:
            apart.add(row.name)
        elif isinstance(expected, InvalidLog):
            assert isinstance(first, InvalidLog), row.name
            assert str(first) == str(expected)
        else:
            assert first == expected, row.name
    # longer than one read (a page each), or no row to read: the tail is asked apart
    assert apart == {"long", "endless", "binary", "foreign-tail", "bad-last"}
    broken = {row.name for row, first in paged if isinstance(first, InvalidLog)}
    assert broken == {"broken-early", "bad-old"}  # a row, but a turn no viewer can read
    more = {row.name for row, first in paged if isinstance(first, TailPage) and first.more}
    assert more == {"many-ends"}


def test_a_query_and_a_limit_pick_the_rows_the_list_picks(tmp_path: Path) -> None:
    write_fleet(tmp_path)
    for query, limit in (("a", 4), ("CYCLE", 10), ("", 3), ("nothing", 5)):
        listed, paged, _ = asyncio.run(read_both(tmp_path, query, limit))
        assert [row for row, _ in paged] == listed


def test_a_directory_gone_is_unavailable_as_for_the_list(tmp_path: Path) -> None:
    directory = tmp_path / "logs"
    directory.mkdir()
    reader = JsonlReader(directory)
    shutil.rmtree(directory)

    async def rows() -> None:
        async for _ in reader.sessions_paged("", 10, types=TYPES, page=200):
            pass

    with pytest.raises(StoreUnavailable, match="the directory of session logs is gone"):
        asyncio.run(rows())
    with pytest.raises(StoreUnavailable, match="the directory of session logs is gone"):
        asyncio.run(reader.sessions("", 10))
