"""The JSONL reader's list under a hostile directory: the shared watcher, and without one."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

import pytest

from dsh_tool_todo.core.contract import EVENT_TYPE
from dsh_tool_todo.stores.jsonl import JsonlReader, JsonlSession
from tests.stores.jsonl.log_lines import append_lines, line, run_within

PLAN = {"todos": [{"content": "A", "status": "in_progress"}]}


async def until_listed(reader: JsonlReader, want: int) -> int:
    changes = reader.changes()
    try:
        while (await reader.sessions("", 1))[1] != want:
            await anext(changes)
        return want
    finally:
        await changes.aclose()


@pytest.mark.parametrize("watch", [True, False], ids=["watched", "polled"])
def test_ten_thousand_logs_appearing_at_once_are_all_listed(tmp_path: Path, watch: bool) -> None:
    reader = JsonlReader(tmp_path, watch=watch, list_interval=0.05)
    body = line(0, EVENT_TYPE, PLAN)

    async def go() -> int:
        changes = reader.changes()
        first = asyncio.ensure_future(anext(changes))
        await asyncio.sleep(0.3)
        for number in range(10_000):  # faster than a watcher's queue drains: it may overflow
            (tmp_path / f"s{number:05}.jsonl").write_bytes(body)
        await first
        while (await reader.sessions("", 5))[1] != 10_000:
            await anext(changes)
        rows, _ = await reader.sessions("", 5)
        assert all(row.working_on == "A" for row in rows)
        await changes.aclose()
        return 10_000

    assert run_within(go()) == 10_000


def test_hostile_file_names_are_listed_as_written_or_left_out(tmp_path: Path) -> None:
    body = line(0, EVENT_TYPE, PLAN)
    listed = [
        "new\nline",
        "<img src=x onerror=alert(1)>&amp;",
        "bidi\u202eevil",
        "spa ce",
        "stream",
    ]
    for name in listed:
        (tmp_path / f"{name}.jsonl").write_bytes(body)
    (tmp_path / ".hidden.jsonl").write_bytes(body)
    (tmp_path / "back\\slash.jsonl").write_bytes(body)
    os.close(os.open(os.fsencode(tmp_path) + b"/bad\xff.jsonl", os.O_CREAT | os.O_WRONLY))
    outside = tmp_path.parent / f"{tmp_path.name}-outside.jsonl"
    outside.write_bytes(body)
    (tmp_path / "escape.jsonl").symlink_to(outside)
    os.mkfifo(tmp_path / "fifo.jsonl")
    reader = JsonlReader(tmp_path)

    async def both() -> tuple[set[str], set[str]]:
        plain = {row.name for row in (await reader.sessions("", 100))[0]}
        changes = reader.changes()
        first = asyncio.ensure_future(anext(changes))
        await asyncio.sleep(0.3)
        append_lines(tmp_path / "new\nline.jsonl", line(1, "note", {}))
        assert await first == frozenset({"new\nline"})
        watched = {row.name for row in (await reader.sessions("", 100))[0]}
        await changes.aclose()
        return plain, watched

    plain, watched = run_within(both())  # type: ignore[misc]
    assert plain == watched == set(listed)


def test_a_torn_tail_under_a_watched_list_keeps_the_last_whole_plan(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    append_lines(path, line(0, EVENT_TYPE, PLAN))
    reader = JsonlReader(tmp_path)
    torn = line(1, EVENT_TYPE, {"todos": []})[:20]

    async def go() -> tuple[object, object]:
        changes = reader.changes()
        first = asyncio.ensure_future(anext(changes))
        await asyncio.sleep(0.3)
        append_lines(path, torn)
        await first
        (during,) = (await reader.sessions("", 5))[0]
        append_lines(path, line(1, EVENT_TYPE, {"todos": []})[20:])
        await anext(changes)
        (after,) = (await reader.sessions("", 5))[0]
        await changes.aclose()
        return (during.last_seq, during.working_on), (after.last_seq, after.working_on)

    assert run_within(go()) == ((0, "A"), (1, None))


def test_a_follow_is_woken_by_the_watcher_not_by_polling(tmp_path: Path) -> None:
    with JsonlSession(tmp_path / "s.jsonl") as log:
        log.append("turn/start", {})
    reader = JsonlReader(tmp_path, poll_interval=3600, watch_safety=3600)

    async def go() -> float:
        events = reader.follow("s", after=0)
        waiting = asyncio.ensure_future(anext(events))
        await asyncio.sleep(0.3)
        began = time.monotonic()
        with JsonlSession(tmp_path / "s.jsonl") as log:
            log.append(EVENT_TYPE, PLAN)
        event = await waiting
        assert event["seq"] == 1
        await events.aclose()
        return time.monotonic() - began

    assert run_within(go()) < 5.0  # polling alone would take an hour


def test_without_a_watcher_a_follow_still_polls(tmp_path: Path) -> None:
    with JsonlSession(tmp_path / "s.jsonl") as log:
        log.append("turn/start", {})
    reader = JsonlReader(tmp_path, watch=False, poll_interval=0.01, watch_safety=3600)

    async def go() -> int:
        events = reader.follow("s", after=0)
        waiting = asyncio.ensure_future(anext(events))
        await asyncio.sleep(0.2)
        with JsonlSession(tmp_path / "s.jsonl") as log:
            log.append(EVENT_TYPE, PLAN)
        seq: int = (await waiting)["seq"]
        await events.aclose()
        return seq

    assert run_within(go()) == 1


def test_a_use_of_a_watch_whose_directory_went_never_ends_a_later_use(tmp_path: Path) -> None:
    from dsh_tool_todo.stores.jsonl._watch import DirectoryWatch

    directory = tmp_path / "logs"
    directory.mkdir()
    watch = DirectoryWatch(str(directory))

    async def go() -> tuple[bool, bool]:
        old = watch.start()
        assert old is not None
        directory.rmdir()  # the watch closes when the kernel says so
        for _ in range(100):
            if not watch.active:
                break
            await asyncio.sleep(0.02)
        gone = not watch.active
        directory.mkdir()
        new = watch.start()
        assert new is not None
        old()  # the first user leaves late
        still = watch.active
        new()
        return gone, still and not watch.active

    assert run_within(go()) == (True, True)


def test_a_held_list_shows_every_change_made_before_it_is_asked_for(tmp_path: Path) -> None:
    """A held list answers from its index, looking again only at what the watcher named:
    a write, a new log, a deleted one, one deleted and created again, a torn tail, a log
    turned into a symlink out of the directory, and a write to a log another name links to
    all show in the very next list."""
    for name in ("a", "b", "c", "d", "e", "f"):
        append_lines(tmp_path / f"{name}.jsonl", line(0, EVENT_TYPE, PLAN))
    os.utime(tmp_path / "f.jsonl", (2_000_000_000, 2_000_000_000))  # first: ordered by mtime
    (tmp_path / "g.jsonl").symlink_to(tmp_path / "f.jsonl")
    outside = tmp_path.parent / f"{tmp_path.name}-outside.jsonl"
    outside.write_bytes(line(0, EVENT_TYPE, PLAN))
    reader = JsonlReader(tmp_path, list_resync=3600)
    reader.hold_list()
    other = {"todos": [{"content": "B", "status": "in_progress"}]}

    def listed(rows: list[Any]) -> dict[str, tuple[object, object]]:
        return {row.name: (row.last_seq, row.working_on) for row in rows}

    async def go() -> tuple[dict[str, tuple[object, object]], ...]:
        before = listed((await reader.sessions("", 100))[0])
        # no await between the changes and the list: the loop has read none of the watcher's news
        append_lines(tmp_path / "a.jsonl", line(1, EVENT_TYPE, other))
        append_lines(tmp_path / "new.jsonl", line(0, EVENT_TYPE, other))
        (tmp_path / "b.jsonl").unlink()
        (tmp_path / "c.jsonl").unlink()
        append_lines(tmp_path / "c.jsonl", line(0, "turn/start", {}))
        append_lines(tmp_path / "d.jsonl", line(1, EVENT_TYPE, other)[:15])
        (tmp_path / "e.jsonl").unlink()
        (tmp_path / "e.jsonl").symlink_to(outside)
        after = listed((await reader.sessions("", 100))[0])
        append_lines(tmp_path / "d.jsonl", line(1, EVENT_TYPE, other)[15:])
        append_lines(tmp_path / "f.jsonl", line(1, EVENT_TYPE, other))
        os.utime(tmp_path / "f.jsonl", (1_000_000_000, 1_000_000_000))
        rows = (await reader.sessions("", 100))[0]
        await reader.aclose()
        return before, after, listed(rows), {"order": tuple(row.name for row in rows)}

    before, after, last, order = run_within(go())  # type: ignore[misc]
    assert before == dict.fromkeys("abcdefg", (0, "A"))
    assert after == {
        "a": (1, "B"),
        "c": (0, None),
        "d": (0, "A"),
        "f": (0, "A"),
        "g": (0, "A"),
        "new": (0, "B"),
    }
    assert (last["d"], last["f"], last["g"]) == ((1, "B"), (1, "B"), (1, "B"))
    assert order["order"][-2:] == ("f", "g")  # their mtime went back: last


def test_a_held_list_lets_its_watch_go_when_closed_and_reads_anew_on_another_loop(
    tmp_path: Path,
) -> None:
    append_lines(tmp_path / "a.jsonl", line(0, EVENT_TYPE, PLAN))
    reader = JsonlReader(tmp_path)
    reader.hold_list()

    async def first() -> int:
        return (await reader.sessions("", 10))[1]

    assert run_within(first()) == 1
    append_lines(tmp_path / "b.jsonl", line(0, EVENT_TYPE, PLAN))  # no loop runs: no watcher reads

    async def second() -> tuple[int, bool]:
        count = (await reader.sessions("", 10))[1]
        watch = reader._watcher
        await reader.aclose()
        return count, watch is not None and not watch.active

    assert run_within(second()) == (2, True)


def test_a_directory_deleted_and_made_again_is_watched_again(tmp_path: Path) -> None:
    served = tmp_path / "logs"
    served.mkdir()
    (served / "a.jsonl").write_bytes(line(0, EVENT_TYPE, PLAN))
    # polled once a minute: only a watch can tell the new log in time
    reader = JsonlReader(served, watch=True, list_interval=60.0)

    async def go() -> frozenset[str]:
        changes = reader.changes()
        first = asyncio.ensure_future(anext(changes))
        await asyncio.sleep(0.2)
        (served / "a.jsonl").unlink()
        served.rmdir()
        assert await first == frozenset({"a"})  # gone with its directory
        served.mkdir()
        (served / "b.jsonl").write_bytes(line(0, EVENT_TYPE, PLAN))
        told = await anext(changes)
        await changes.aclose()
        return told

    assert run_within(go()) == frozenset({"b"})
