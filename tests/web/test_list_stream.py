"""The session list's stream: it rings when rows of the list may have changed, nothing else."""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import httpx
import pytest

from dsh_tool_todo.core.contract import EVENT_TYPE
from dsh_tool_todo.stores.jsonl import JsonlSession
from dsh_tool_todo.web._listhub import ListHub

from .conftest import LiveServer, SseStream, plan_write, todo, write_log


class Bells:
    """The named events of one stream, read by a thread into a queue (waits can time out)."""

    def __init__(self, url: str) -> None:
        self.queue: queue.Queue[str] = queue.Queue()
        self.client = httpx.Client(timeout=httpx.Timeout(5.0, read=None))
        self.context = self.client.stream("GET", url)
        self.response = self.context.__enter__()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        with contextlib.suppress(httpx.HTTPError):
            for line in self.response.iter_lines():
                if line.startswith("event:"):
                    self.queue.put(line.partition(":")[2].strip())

    def next(self, within: float) -> str | None:
        try:
            return self.queue.get(timeout=within)
        except queue.Empty:
            return None

    def close(self) -> None:
        with contextlib.suppress(httpx.HTTPError):
            self.context.__exit__(None, None, None)
        self.client.close()


@pytest.fixture
def bells() -> Iterator[Callable[[str], Bells]]:
    opened: list[Bells] = []

    def open_bells(url: str) -> Bells:
        opened.append(Bells(url))
        return opened[-1]

    yield open_bells
    for each in opened:
        each.close()


def test_an_append_rings_the_lists_it_matches_and_the_new_row_is_there(
    tmp_path: Path, live_server: Callable[..., LiveServer], bells: Callable[[str], Bells]
) -> None:
    write_log(tmp_path / "agent-1.jsonl", [plan_write(todo("A"))])
    write_log(tmp_path / "other.jsonl", [plan_write(todo("B"))])
    server = live_server(tmp_path)
    everything = bells(f"{server.url}/api/sessions/stream")
    agents = bells(f"{server.url}/api/sessions/stream?q=AGENT")
    assert everything.next(1.0) is None  # nothing until a change

    with JsonlSession(tmp_path / "agent-1.jsonl") as log:
        log.append(EVENT_TYPE, {"todos": [todo("A", "in_progress")]})

    assert everything.next(5) == "changed"
    assert agents.next(5) == "changed"
    row = httpx.get(f"{server.url}/api/sessions?q=agent").json()["sessions"][0]
    assert (row["name"], row["lastSeq"], row["workingOn"]) == ("agent-1", 1, "A")
    assert row["parent"] is None

    with JsonlSession(tmp_path / "other.jsonl") as log:
        log.append("turn/start", {})

    assert everything.next(5) == "changed"
    assert agents.next(1) is None  # a change it does not show


def test_the_list_rows_carry_the_parent_link(tmp_path: Path) -> None:
    from dsh_tool_todo.web.app import create_app

    from .test_app import get

    write_log(
        tmp_path / "child.jsonl",
        [("session/link", {"parent": "gone-parent", "parentCallId": "c1"}), plan_write(todo("A"))],
    )
    rows = get(create_app(tmp_path), "/api/sessions").json()["sessions"]
    assert [(row["name"], row["parent"], row["lastSeq"]) for row in rows] == [
        ("child", "gone-parent", 1)
    ]


@pytest.mark.parametrize("query", ["", "x" * 300])
def test_the_list_stream_takes_any_query(
    tmp_path: Path,
    live_server: Callable[..., LiveServer],
    sse: Callable[..., SseStream],
    query: str,
) -> None:
    server = live_server(tmp_path)
    stream = sse(f"{server.url}/api/sessions/stream?q={query}")
    assert stream.response.status_code == 200
    assert stream.response.headers["content-type"].startswith("text/event-stream")
    assert stream.next().retry == 1000


class CountingReader:
    """A reader whose changes yield ``told`` sets, counting how many watches run."""

    def __init__(self, told: list[frozenset[str]]) -> None:
        self.told = told
        self.opened = 0
        self.closed = 0

    async def changes(self) -> AsyncIterator[frozenset[str]]:
        self.opened += 1
        try:
            for names in self.told:
                await asyncio.sleep(0.05)
                yield names
            await asyncio.sleep(3600)
        finally:
            self.closed += 1


def test_one_watch_serves_every_open_list_and_ends_with_the_last() -> None:
    reader = CountingReader([frozenset({"agent-1"})])

    async def go() -> tuple[bool, bool, int, int]:
        hub = ListHub(reader)
        async with hub.open("AGENT") as agents, hub.open("other") as others:
            await asyncio.wait_for(agents.rung.wait(), 5)
            await asyncio.sleep(0.1)
            assert (reader.opened, reader.closed) == (1, 0)
            rung = (agents.rung.is_set(), others.rung.is_set())
        await asyncio.sleep(0.1)
        return (*rung, reader.opened, reader.closed)

    assert asyncio.run(go()) == (True, False, 1, 1)
