"""The JSONL reader's list, held or under an open list stream, against a hostile directory:
every answer is compared with a fresh, unwatched reader of the same directory."""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsh_tool_todo.core._accept import accepts_logged
from dsh_tool_todo.core._validation import validate_call
from dsh_tool_todo.core.contract import EVENT_TYPE
from dsh_tool_todo.stores.jsonl import JsonlReader
from tests.stores.jsonl.log_lines import WITHIN, append_lines, line, run_within

A = {"todos": [{"content": "A", "status": "in_progress"}]}
B = {"todos": [{"content": "B", "status": "in_progress"}]}


def shown(rows: list[Any]) -> dict[str, tuple[object, object, float]]:
    return {row.name: (row.last_seq, row.working_on, row.last_activity) for row in rows}


async def listed(reader: JsonlReader) -> dict[str, tuple[object, object, float]]:
    return shown((await reader.sessions("", 1000))[0])


async def fresh(directory: Path) -> dict[str, tuple[object, object, float]]:
    reader = JsonlReader(directory, watch=False)
    try:
        return await listed(reader)
    finally:
        await reader.aclose()


def test_a_held_list_shows_a_dangling_symlink_once_its_target_appears(tmp_path: Path) -> None:
    """A symlink to a log not yet written is no session; once its target is written (under
    another name: the watcher names only the target) the next list shows it."""
    append_lines(tmp_path / "a.jsonl", line(0, EVENT_TYPE, A))
    (tmp_path / "soon.jsonl").symlink_to(tmp_path / "target.jsonl")
    (tmp_path / "hidden.jsonl").symlink_to(tmp_path / ".target")
    reader = JsonlReader(tmp_path, list_resync=3600)
    reader.hold_list()

    async def go() -> tuple[dict[str, Any], dict[str, Any]]:
        assert set(await listed(reader)) == {"a"}
        append_lines(tmp_path / "target.jsonl", line(0, EVENT_TYPE, B))
        append_lines(tmp_path / ".target", line(0, EVENT_TYPE, B))
        got = await listed(reader)
        await reader.aclose()
        return got, await fresh(tmp_path)

    got, expected = run_within(go())
    assert set(expected) == {"a", "soon", "target", "hidden"}
    assert got == expected


def test_a_held_list_shows_a_write_through_a_hard_link(tmp_path: Path) -> None:
    """Two names of one file are two sessions; a write under one changes both rows."""
    append_lines(tmp_path / "a.jsonl", line(0, EVENT_TYPE, A))
    os.link(tmp_path / "a.jsonl", tmp_path / "b.jsonl")
    reader = JsonlReader(tmp_path, list_resync=3600)
    reader.hold_list()

    async def go() -> tuple[dict[str, Any], dict[str, Any]]:
        await listed(reader)
        append_lines(tmp_path / "a.jsonl", line(1, EVENT_TYPE, B))
        got = await listed(reader)
        await reader.aclose()
        return got, await fresh(tmp_path)

    got, expected = run_within(go())
    assert expected["b"][:2] == (1, "B")
    assert got == expected


def test_an_open_list_stream_rings_and_lists_a_write_through_a_symlink(tmp_path: Path) -> None:
    """Under an open list stream, a write to a log another name links to rings that name
    too, and the list shows it: the watcher names only the target."""
    append_lines(tmp_path / "a.jsonl", line(0, EVENT_TYPE, A))
    (tmp_path / "l.jsonl").symlink_to(tmp_path / "a.jsonl")
    (tmp_path / "h.jsonl").symlink_to(tmp_path / ".h")
    reader = JsonlReader(tmp_path, list_resync=3600)

    async def go() -> tuple[set[str], dict[str, Any], dict[str, Any]]:
        changes = reader.changes()
        first = asyncio.ensure_future(anext(changes))
        await asyncio.sleep(0.3)  # the stream's index read
        await listed(reader)
        append_lines(tmp_path / "a.jsonl", line(1, EVENT_TYPE, B))
        rung = set(await first)
        append_lines(tmp_path / ".h", line(0, EVENT_TYPE, B))
        while "h" not in rung:
            rung |= await anext(changes)
        got = await listed(reader)
        await changes.aclose()
        await reader.aclose()
        return rung, got, await fresh(tmp_path)

    rung, got, expected = run_within(go())
    assert {"a", "l", "h"} <= rung
    assert got == expected


@pytest.mark.parametrize("held", [True, False], ids=["held", "not-held"])
def test_a_list_under_an_open_stream_shows_a_change_made_just_before(
    tmp_path: Path, held: bool
) -> None:
    """While the page's list stream is open, a list asked for right after a write (before
    the loop has read the watcher) shows the write, as a held list does without a stream."""
    append_lines(tmp_path / "a.jsonl", line(0, EVENT_TYPE, A))
    reader = JsonlReader(tmp_path, list_resync=3600)
    if held:
        reader.hold_list()

    async def go() -> tuple[dict[str, Any], dict[str, Any]]:
        changes = reader.changes()
        first = asyncio.ensure_future(anext(changes))
        await asyncio.sleep(0.3)
        await listed(reader)
        append_lines(tmp_path / "a.jsonl", line(1, EVENT_TYPE, B))
        append_lines(tmp_path / "b.jsonl", line(0, EVENT_TYPE, B))
        got = await listed(reader)
        first.cancel()
        await asyncio.gather(first, return_exceptions=True)
        await changes.aclose()
        await reader.aclose()
        return got, await fresh(tmp_path)

    got, expected = run_within(go())
    assert got == expected


def test_a_list_stream_closed_during_its_directory_read_leaves_no_frozen_index(
    tmp_path: Path,
) -> None:
    """The page's stream closed while its first directory read ran in a thread: that read,
    finishing after, must not become an index no watcher keeps (every later list missed
    every new log)."""
    append_lines(tmp_path / "a.jsonl", line(0, EVENT_TYPE, A))
    reader = JsonlReader(tmp_path, list_resync=3600)
    scan = reader._scan
    started, resume = threading.Event(), threading.Event()

    def slow_scan(*args: Any) -> Any:
        started.set()
        resume.wait(WITHIN)
        return scan(*args)

    async def go() -> tuple[dict[str, Any], dict[str, Any]]:
        reader._scan = slow_scan  # type: ignore[method-assign]
        changes = reader.changes()
        first = asyncio.ensure_future(anext(changes))
        await asyncio.to_thread(started.wait, WITHIN)
        first.cancel()  # the last list page closed: the hub cancels its task
        await asyncio.gather(first, return_exceptions=True)
        await changes.aclose()
        resume.set()
        await asyncio.sleep(0.3)  # the read in the thread ends
        reader._scan = scan  # type: ignore[method-assign]
        append_lines(tmp_path / "b.jsonl", line(0, EVENT_TYPE, B))
        got = await listed(reader)
        await reader.aclose()
        return got, await fresh(tmp_path)

    got, expected = run_within(go())
    assert set(expected) == {"a", "b"}
    assert got == expected


@pytest.mark.parametrize("stream", [False, True], ids=["held", "stream"])
def test_a_hard_link_made_after_a_list_shows_a_write_through_the_new_name(
    tmp_path: Path, stream: bool
) -> None:
    """``link(a, b)`` tells a directory watcher only that ``b`` appeared (``a``'s link
    count changes unseen): a write through ``b`` then changes ``a``'s row too."""
    append_lines(tmp_path / "a.jsonl", line(0, EVENT_TYPE, A))
    reader = JsonlReader(tmp_path, list_resync=3600)
    reader.hold_list()

    async def go() -> tuple[set[str], dict[str, Any], dict[str, Any]]:
        changes = reader.changes()
        first = asyncio.ensure_future(anext(changes))
        await asyncio.sleep(0.3)
        await listed(reader)
        os.link(tmp_path / "a.jsonl", tmp_path / "b.jsonl")
        rung: set[str] = set(await first) if stream else set()
        await listed(reader)
        append_lines(tmp_path / "b.jsonl", line(1, EVENT_TYPE, B))
        while stream and "a" not in rung:
            rung |= await anext(changes)
        got = await listed(reader)
        first.cancel()
        await asyncio.gather(first, return_exceptions=True)
        await changes.aclose()
        await reader.aclose()
        return rung, got, await fresh(tmp_path)

    rung, got, expected = run_within(go())
    assert expected["a"][:2] == (1, "B")
    assert got == expected
    assert not stream or rung >= {"a", "b"}


def test_a_held_list_shows_a_write_through_a_hard_link_deleted_right_after(
    tmp_path: Path,
) -> None:
    """A write through a second name, then that name deleted, before the list: the watcher
    names only the deleted name; the first name's row shows the write."""
    append_lines(tmp_path / "a.jsonl", line(0, EVENT_TYPE, A))
    reader = JsonlReader(tmp_path, list_resync=3600)
    reader.hold_list()

    async def go() -> tuple[dict[str, Any], dict[str, Any]]:
        await listed(reader)
        os.link(tmp_path / "a.jsonl", tmp_path / "b.jsonl")
        await listed(reader)
        append_lines(tmp_path / "b.jsonl", line(1, EVENT_TYPE, B))
        (tmp_path / "b.jsonl").unlink()
        got = await listed(reader)
        await reader.aclose()
        return got, await fresh(tmp_path)

    got, expected = run_within(go())
    assert expected["a"][:2] == (1, "B")
    assert got == expected


class _Str(str):
    pass


class _Int(int):
    pass


class _Dict(dict):  # type: ignore[type-arg]
    pass


_STATUSES = ["pending", "in_progress", "completed"]
_TEXTS = st.one_of(
    st.text(max_size=4),
    st.sampled_from(["", " ", "\u3000", "\x1c", "\u200b", "\ud800", "e\u0301", "\u00e9", "A"]),
)
_VALUES = st.one_of(
    _TEXTS,
    _TEXTS.map(_Str),
    st.sampled_from(_STATUSES),
    st.sampled_from(_STATUSES).map(_Str),
    st.booleans(),
    st.integers().map(_Int),
    st.floats(),
    st.none(),
    st.just(b"pending"),
)
_ITEMS = st.one_of(
    st.builds(lambda c, s: {"content": c, "status": s}, _VALUES, _VALUES),
    st.builds(lambda c, s: _Dict(content=c, status=s), _VALUES, _VALUES),
    st.dictionaries(st.sampled_from(["content", "status", "x"]), _VALUES, max_size=3),
    _VALUES,
)


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(_ITEMS, max_size=5), st.booleans())
def test_a_logged_write_of_nasty_values_is_accepted_only_where_pydantic_accepts_it(
    todos: list[Any], repeat: bool
) -> None:
    """Subclasses of str, int and dict, NaN, surrogates, look-alike contents, repeats: the
    check without pydantic says yes only where the full validation does."""
    if repeat and todos:
        todos.append(todos[-1])
    if accepts_logged(todos):
        validate_call({"todos": todos}, allow_parallel=True)  # raises if it would refuse
