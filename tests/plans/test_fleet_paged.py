"""``dsh-todo sessions`` on a directory: each short log read once and only the tree kept, and
what it prints is what reading the reader protocol's list, then each log's tail pages, prints.

The JSONL reader hands ``read_fleet`` its rows one at a time with each log's first tail page
(``sessions_paged``); a reader offering only the protocol is read the way every fleet was
read before, a list then a tail read per log: both must give the same bytes.
"""

from __future__ import annotations

import asyncio
import io
import json
import tracemalloc
from pathlib import Path
from typing import Any, cast

import pytest

from dsh_tool_todo.cli._sources import _print_fleet
from dsh_tool_todo.core.contract import EVENT_TYPE, TURN_START
from dsh_tool_todo.plans.fleet import FleetNode, fleet_json, read_fleet, render_tree
from dsh_tool_todo.protocols import LogReader, SessionSummary, TailPage
from dsh_tool_todo.stores.jsonl import JsonlReader
from tests.stores.jsonl.fleet_logs import write_fleet
from tests.stores.jsonl.log_lines import line


class ProtocolOnly:
    """A JSONL reader seen through the reader protocol alone: a list, then tail pages."""

    def __init__(self, reader: JsonlReader) -> None:
        self._reader = reader

    async def sessions(self, query: str, limit: int) -> tuple[list[SessionSummary], int]:
        return await self._reader.sessions(query, limit)

    async def tail(
        self, name: str, *, before: int | None, limit: int, types: Any = None
    ) -> TailPage:
        return await self._reader.tail(name, before=before, limit=limit, types=types)


def read(directory: Path, *, protocol_only: bool = False) -> list[FleetNode]:
    async def roots() -> list[FleetNode]:
        reader = JsonlReader(directory)
        try:
            source = ProtocolOnly(reader) if protocol_only else reader
            return await read_fleet(cast(LogReader, source))
        finally:
            await reader.aclose()

    return asyncio.run(roots())


def write_plain(directory: Path, count: int) -> None:
    """``count`` logs of one turn of 4 writes of 6 items, as a fleet's agents leave them."""
    for number in range(count):
        lines = [line(0, TURN_START, {})]
        for write in range(4):
            items = [
                {
                    "content": f"Step {index} of task {number}: read, change, test it",
                    "status": "completed" if index < write else "pending",
                }
                for index in range(6)
            ]
            lines.append(line(write + 1, EVENT_TYPE, {"todos": items}))
        (directory / f"agent-{number:05}.jsonl").write_bytes(b"".join(lines))


def test_the_tree_of_logs_read_once_is_the_tree_of_list_and_tail_reads(tmp_path: Path) -> None:
    write_fleet(tmp_path)
    roots = read(tmp_path)

    assert fleet_json(roots) == fleet_json(read(tmp_path, protocol_only=True))
    assert render_tree(roots) == render_tree(read(tmp_path, protocol_only=True))
    nodes = {node["key"]: node for node in _walk(fleet_json(roots))}
    unreadable = {key for key, node in nodes.items() if node["readable"] is False}
    assert unreadable == {"binary", "foreign-tail", "bad-last", "broken-early", "bad-old"}
    assert nodes["broken-early"]["progress"] is not None  # its row was read, its turn not
    assert nodes["endless"]["signals"][0]["atLeast"] is True
    assert nodes["lead%2fworker%40call_1"]["end"] == {
        "outcome": "failed",
        "error": "the search timed out",
    }


def _walk(trees: list[dict[str, Any]]) -> list[dict[str, Any]]:
    found = []
    for tree in trees:
        found.append(tree)
        found += _walk(tree["children"])
    return found


class Writes(io.StringIO):
    """Standard output as the command writes it: how many writes, and the longest."""

    def __init__(self) -> None:
        super().__init__()
        self.sizes: list[int] = []

    def write(self, text: str) -> int:
        self.sizes.append(len(text))
        return super().write(text)


def test_sessions_prints_the_same_bytes_either_way_a_few_hundred_trees_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_fleet(tmp_path)
    write_plain(tmp_path, 600)
    once, text_once = Writes(), io.StringIO()
    _print_fleet(str(tmp_path), once, as_json=True)
    _print_fleet(str(tmp_path), text_once)

    monkeypatch.delattr(JsonlReader, "sessions_paged")
    listed, text_listed = io.StringIO(), io.StringIO()
    _print_fleet(str(tmp_path), listed, as_json=True)
    _print_fleet(str(tmp_path), text_listed)

    assert once.getvalue() == listed.getvalue()
    assert text_once.getvalue() == text_listed.getvalue()
    document = json.loads(once.getvalue())
    assert once.getvalue() == json.dumps(document) + "\n"  # as one json.dumps would write it
    assert len(document["sessions"]) > 600
    assert max(once.sizes) < len(once.getvalue()) / 2  # never the whole fleet in one string


def peak_while_read(directory: Path) -> int:
    tracemalloc.start()
    try:
        read(directory)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_reading_a_fleet_keeps_its_tree_and_no_log(tmp_path: Path) -> None:
    """What a fleet's read holds at its peak grows per session by a node of the tree (about
    500 bytes), never by what a log's events take once read (about 10 KB here), nor by a list
    row and its index entry held for every session until the tree is built (the protocol's
    list, then tail reads: about 1 KB)."""
    small, large = tmp_path / "small", tmp_path / "large"
    small.mkdir()
    large.mkdir()
    write_plain(small, 200)
    write_plain(large, 1000)
    peak_while_read(small)  # the first read imports and builds what every read shares

    per_session = (peak_while_read(large) - peak_while_read(small)) / 800

    assert per_session < 768
