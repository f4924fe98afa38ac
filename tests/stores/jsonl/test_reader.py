"""The reader contract, run against a directory of JSON Lines logs."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from dsh_tool_todo.errors import SessionNotFound, TornTailWarning
from dsh_tool_todo.protocols import LogReader
from dsh_tool_todo.stores.jsonl import JsonlReader, JsonlSession, read_events
from tests.stores.jsonl.half_writes import HALF_WRITES
from tests.stores.reader_contract import (
    Deleter,
    Event,
    FileReaderContract,
    RawWriter,
    Runner,
    Writer,
    next_of,
)


class TestJsonlReader(FileReaderContract):
    @pytest.fixture
    def reader(self, run: Runner, tmp_path: Path) -> Iterator[LogReader]:
        reader = JsonlReader(tmp_path, poll_interval=0.005)
        yield reader
        run(reader.aclose())

    @pytest.fixture
    def open_writer(self, tmp_path: Path) -> Writer:
        return lambda name: JsonlSession(tmp_path / f"{name}.jsonl")

    @pytest.fixture
    def log_path(self, tmp_path: Path) -> Callable[[str], Path]:
        return lambda name: tmp_path / f"{name}.jsonl"

    @pytest.fixture
    def write_raw(self, append_bytes: Callable[[str, bytes], None]) -> RawWriter:
        return lambda name, event: append_bytes(name, json.dumps(event).encode() + b"\n")

    @pytest.fixture
    def delete(self, tmp_path: Path) -> Deleter:
        return lambda name: (tmp_path / f"{name}.jsonl").unlink()

    @pytest.fixture
    def where(self, tmp_path: Path) -> str:
        return str(tmp_path)

    @pytest.fixture
    def owner_names(self) -> bool:
        return True


def test_a4_a_file_name_that_is_not_utf8_is_skipped_not_listed(tmp_path: Path) -> None:
    """A4: such a name reached the page as a lone surrogate and blanked its session list."""
    with JsonlSession(tmp_path / "good.jsonl") as session:
        session.append("turn/start", {})
    with open(os.fsencode(tmp_path) + b"/bad\xff.jsonl", "wb") as log:
        log.write(b'{"seq":0,"type":"turn/start","data":{}}\n')
    reader = JsonlReader(tmp_path)

    rows, total = asyncio.run(reader.sessions("", 10))

    assert ([row.name for row in rows], total) == (["good"], 1)
    with pytest.raises(SessionNotFound, match="bad"):
        asyncio.run(reader.snapshot("bad\udcff"))


KILLED_WRITER = (
    HALF_WRITES
    + r"""
import sys
import dsh_tool_todo.stores.jsonl.session as session_module

session_module.os = HalfWrites(0.001)
session = session_module.JsonlSession(sys.argv[1])
print("ready", flush=True)
count = 0
while True:
    todos = [{"content": f"c{count} " + "x" * (count % 300), "status": "pending"}]
    session.append("todo/write", {"todos": todos})
    count += 1
"""
)


@pytest.mark.parametrize("round_", range(3))
def test_a_writer_killed_mid_line_under_a_follower_loses_and_invents_nothing(
    tmp_path: Path, round_: int
) -> None:
    path = tmp_path / "s.jsonl"
    with JsonlSession(path) as session:
        session.append("turn/start", {})
    reader = JsonlReader(tmp_path, poll_interval=0.001)

    async def follow() -> list[Event]:
        events = reader.follow("s", after=-1)
        seen = [await anext(events)]
        child = await asyncio.create_subprocess_exec(
            sys.executable, "-c", KILLED_WRITER, str(path), stdout=asyncio.subprocess.PIPE
        )
        assert child.stdout is not None
        assert await child.stdout.readline() == b"ready\n"
        await asyncio.sleep(0.05 + 0.03 * round_)
        child.kill()
        await child.wait()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", TornTailWarning)
            with JsonlSession(path) as session:  # cuts off the torn line, then appends
                last = session.append("turn/end", {})
        while seen[-1]["seq"] < last["seq"]:
            seen.append(await asyncio.wait_for(anext(events), 10))
        return seen

    seen = asyncio.run(follow())
    assert seen == read_events(path)
    assert seen[-1]["type"] == "turn/end"


def test_a_torn_line_cut_off_and_replaced_by_a_shorter_one_is_read(tmp_path: Path) -> None:
    """The follower had searched the torn bytes for a newline; the new, shorter line ends
    inside them, so it must search them again once the file shrank."""
    path = tmp_path / "s.jsonl"
    with JsonlSession(path) as session:
        session.append("turn/start", {})
    with path.open("ab") as log:
        log.write(b'{"seq":1,"type":"todo/write","data":{"todos":[' + b" " * 200)
    reader = JsonlReader(tmp_path, poll_interval=0.001)

    async def follow() -> Event:
        snapshot = await reader.snapshot("s")
        events = reader.follow("s", after=snapshot.last_seq, since=snapshot)
        waiting = asyncio.ensure_future(next_of(events))
        await asyncio.sleep(0.05)  # the follower has searched the torn bytes
        with pytest.warns(TornTailWarning, match="cut off"), JsonlSession(path) as session:
            session.append("turn/end", {})  # cut and appended between two polls
        return await asyncio.wait_for(waiting, 5)

    assert asyncio.run(follow()) == {"seq": 1, "type": "turn/end", "data": {}}


@pytest.mark.parametrize("read", ["snapshot", "follow"])
def test_a_log_deleted_between_locating_and_opening_it_is_a_session_not_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, read: str
) -> None:
    """A stream that opened as its log was deleted said the raw ``[Errno 2]`` to the page,
    not that the log was deleted."""
    with JsonlSession(tmp_path / "s.jsonl") as session:
        session.append("note", {})
    reader = JsonlReader(tmp_path)
    located = JsonlReader._located

    def deleted_after(self: JsonlReader, name: str) -> tuple[str, int]:
        found = located(self, name)
        os.unlink(found[0])
        return found

    monkeypatch.setattr(JsonlReader, "_located", deleted_after)

    async def main() -> None:
        if read == "snapshot":
            await reader.snapshot("s")
        else:
            async for _ in reader.follow("s", after=-1):
                pass

    with pytest.raises(SessionNotFound):
        asyncio.run(main())
