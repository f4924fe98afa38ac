"""A log rewritten in place under its follower (``cp other.jsonl log.jsonl``): the same inode,
maybe the same size, the plan changed where no end of its last line shows it. ``watch`` and the
web view's stream (one follower, ``_tail._Tail``) read the log again, never keep the old plan."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dsh_tool_todo.core.contract import EVENT_TYPE
from dsh_tool_todo.errors import LogReplaced
from dsh_tool_todo.stores.jsonl import JsonlReader, current_plan, follow_plan
from tests.conftest import todo


def log_text(label: str, *, writes: int = 1) -> bytes:
    """A turn, then ``writes`` plans ``[label-N]``, as ``json.dumps`` writes them by default:
    the label sits in the middle of a line of about 100 bytes."""
    lines = [{"seq": 0, "type": "turn/start", "data": {"prompt": "p"}}]
    lines += [
        {"seq": 1 + n, "type": EVENT_TYPE, "data": {"todos": [todo(f"{label}-{n}", "in_progress")]}}
        for n in range(writes)
    ]
    return "".join(json.dumps(line) + "\n" for line in lines).encode()


class Done(Exception):
    """The follower's script ran out."""


def followed(path: Path, actions: list[Callable[[], object]]) -> list[Any]:
    """Every plan ``follow_plan`` (what ``dsh-todo watch`` draws) yields while ``actions`` run
    between its polls."""
    script = iter(actions)

    def sleep(_: float) -> None:
        action = next(script, None)
        if action is None:
            raise Done
        action()

    seen: list[Any] = []
    with pytest.raises(Done):
        seen.extend(follow_plan(path, interval=0.05, sleep=sleep))
    return seen


def rewrite(path: Path, data: bytes, *, keep_mtime: bool = False) -> Callable[[], None]:
    """``cp``: the same file truncated and written again (its inode kept)."""

    def run() -> None:
        before = path.stat()
        with path.open("r+b") as file:
            file.truncate(0)
            file.write(data)
        if keep_mtime:  # as `cp -p` or a coarse clock may leave it
            os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))

    return run


def touch_later(path: Path) -> Callable[[], None]:
    def run() -> None:
        info = path.stat()
        os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns + 1_000_000_000))

    return run


def test_a_same_size_rewrite_in_place_is_drawn_by_watch(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    path.write_bytes(log_text("AAAA"))
    other = log_text("BBBB")
    assert len(other) == path.stat().st_size

    seen = followed(path, [rewrite(path, other)])

    assert seen == [[todo("AAAA-0", "in_progress")], [todo("BBBB-0", "in_progress")]]
    assert seen[-1] == current_plan(path)


def test_a_rewrite_that_keeps_size_and_mtime_is_told_by_its_last_line(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    path.write_bytes(log_text("AAAA"))

    seen = followed(path, [rewrite(path, log_text("BBBB"), keep_mtime=True), touch_later(path)])

    assert seen == [[todo("AAAA-0", "in_progress")], [todo("BBBB-0", "in_progress")]]


def test_a_same_size_rewrite_with_the_same_last_line_is_told_by_its_mtime(
    tmp_path: Path,
) -> None:
    path = tmp_path / "a.jsonl"
    first = log_text("AAAA") + b'{"seq": 2, "type": "note", "data": {}}\n'
    path.write_bytes(first)
    # the plan changed above a last line that did not: only the write time tells
    other = log_text("BBBB") + b'{"seq": 2, "type": "note", "data": {}}\n'

    seen = followed(path, [rewrite(path, other), touch_later(path)])

    assert seen == [[todo("AAAA-0", "in_progress")], [todo("BBBB-0", "in_progress")]]


def test_a_touch_alone_redraws_nothing(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    path.write_bytes(log_text("AAAA"))

    assert followed(path, [touch_later(path), lambda: None]) == [[todo("AAAA-0", "in_progress")]]


@pytest.mark.parametrize("keep_mtime", [False, True])
def test_the_web_views_follower_says_a_same_size_rewrite_replaced_the_log(
    tmp_path: Path, keep_mtime: bool
) -> None:
    path = tmp_path / "a.jsonl"
    path.write_bytes(log_text("AAAA"))

    async def main() -> object:
        reader = JsonlReader(tmp_path, watch=False, poll_interval=0.01)
        snapshot = await reader.snapshot("a")
        stream = reader.follow("a", after=snapshot.last_seq, since=snapshot)
        try:
            waiting = asyncio.ensure_future(anext(stream))
            await asyncio.sleep(0.1)  # the follower stands at the end of the log
            rewrite(path, log_text("BBBB"), keep_mtime=keep_mtime)()
            if keep_mtime:
                touch_later(path)()  # a look is made on a change of the file's times
            try:
                return await asyncio.wait_for(waiting, 5)
            except LogReplaced:
                return "replaced"
        finally:
            await stream.aclose()
            await reader.aclose()

    assert asyncio.run(main()) == "replaced"
