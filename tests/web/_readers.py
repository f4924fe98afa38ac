"""What the web tests of both stores share: a reader that counts what the app asks of the
store it wraps, a client that leaves a stream after its first frame, and the checks of the
list's signals each store's tests run."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

import httpx
import pytest

from dsh_tool_todo.core.contract import EVENT_TYPE, SESSION_END_EVENT_TYPE
from dsh_tool_todo.core.links import end_data
from dsh_tool_todo.plans import fleet
from dsh_tool_todo.protocols import LogReader, Snapshot, TailPage
from dsh_tool_todo.stores import open_reader
from dsh_tool_todo.web import _fleet
from dsh_tool_todo.web.app import create_app

HOST = "127.0.0.1:8765"


class Spied:
    """``reader`` with each read back from the end counted by session (``tails``): what a
    list's signals cost. Until ``gate`` is set (when one is given), those reads wait. Each
    event a follower yields is counted (``followed``), and ``closed`` counts the followers
    that were closed."""

    def __init__(self, reader: LogReader) -> None:
        self._reader = reader
        self.tails: list[str] = []
        self.gate: asyncio.Event | None = None
        self.followed = 0
        self.closed = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._reader, name)

    async def tail(
        self, name: str, *, before: int | None, limit: int, types: Collection[str] | None = None
    ) -> TailPage:
        self.tails.append(name)
        if self.gate is not None:
            await self.gate.wait()
        return await self._reader.tail(name, before=before, limit=limit, types=types)

    async def follow(
        self, name: str, *, after: int, since: Snapshot | None = None
    ) -> AsyncIterator[Any]:
        following = self._reader.follow(name, after=after, since=since)
        try:
            async for event in following:
                self.followed += 1
                yield event
        finally:
            await following.aclose()  # type: ignore[attr-defined]
            self.closed += 1


@dataclass
class Left:
    """What a stream did once its client left after the first ``projection`` frame."""

    frames_after: int  # projection frames the app still sent
    followed_at_leaving: int  # events the reader's follower had yielded when the client left
    seconds: float  # from the client leaving to the app's answer ending


async def leave_after_first_frame(
    app: Any, reader: Spied, path: str, headers: dict[str, str], *, within: float = 10.0
) -> Left:
    """Ask ``app`` for the stream at ``path`` as uvicorn would, and leave once its first
    ``projection`` frame is sent: ``receive`` then says ``http.disconnect``, and every send
    after it is dropped, as a server drops what it cannot deliver any more."""
    gone = asyncio.Event()
    asked = False
    left_at = 0.0
    frames_after = 0
    followed_at_leaving = 0

    async def receive() -> dict[str, Any]:
        nonlocal asked
        if not asked:
            asked = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await gone.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        nonlocal left_at, frames_after, followed_at_leaving
        if message["type"] != "http.response.body" or b"event: projection" not in message.get(
            "body", b""
        ):
            return
        if gone.is_set():
            frames_after += 1
        else:
            left_at = time.monotonic()
            followed_at_leaving = reader.followed
            gone.set()

    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", HOST.encode())]
        + [(key.lower().encode(), value.encode()) for key, value in headers.items()],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8765),
    }
    async with app.router.lifespan_context(app):
        await asyncio.wait_for(app(scope, receive, send), within)
    assert gone.is_set(), "the stream sent no projection frame"
    return Left(frames_after, followed_at_leaving, time.monotonic() - left_at)


# --- the list's signals, over any store --------------------------------------------------

Events = list[tuple[str, dict[str, Any]]]
Append = Callable[[str, Events], None]
"""``append(name, events)``: record ``events`` (type, data) in session ``name`` of the store."""

TURN = ("turn/start", {})
NOTE = ("message/assistant", {"text": "thinking"})
DROPPED = {"kind": "dropped", "seq": 2, "items": ["B"], "count": 1}


def write(*items: tuple[str, str]) -> tuple[str, dict[str, Any]]:
    return (EVENT_TYPE, {"todos": [{"content": c, "status": s} for c, s in items]})


def dropping() -> Events:
    """A turn whose second write drops an unfinished item: a ``dropped`` signal at seq 2."""
    return [TURN, write(("A", "pending"), ("B", "pending")), write(("A", "in_progress"))]


async def settled(client: httpx.AsyncClient) -> dict[str, Any]:
    """The list once no row's signals are pending (a loaded machine may need a second ask)."""
    deadline = time.monotonic() + 10
    while True:
        body: dict[str, Any] = (await client.get("/api/sessions")).json()
        if not any(row["signalsPending"] for row in body["sessions"]):
            return body
        assert time.monotonic() < deadline, f"signals never came: {body}"
        await asyncio.sleep(0.02)


def rows_of(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {row["name"]: row for row in body["sessions"]}


def check_signals_not_read_yet_are_pending(source: str | Path, append: Append) -> None:
    """B3: a row whose signals were not read within the budget once said ``null``."""
    append("worker", dropping())
    reader = Spied(open_reader(source))

    async def calls(client: httpx.AsyncClient) -> tuple[Any, Any]:
        reader.gate = asyncio.Event()  # the signals' reads wait: past the list's budget
        first = (await client.get("/api/sessions")).json()
        reader.gate.set()
        return first, await settled(client)

    first, later = run(create_app(reader), calls)
    (row,) = first["sessions"]
    assert (row["signals"], row["signalsPending"]) == ([], True)
    (row,) = later["sessions"]
    assert (row["signals"], row["signalsPending"]) == ([DROPPED], False)


def check_signals_are_read_again_only_after_a_plan_event(
    source: str | Path, append: Append
) -> None:
    """Appends that are no plan event once made every listed row read its turn again."""
    for name in ("a", "b"):
        append(name, dropping())
    reader = Spied(open_reader(source))

    async def calls(client: httpx.AsyncClient) -> list[list[str]]:
        reads = []
        await settled(client)
        for events, last_seq in (([NOTE, ("turn/end", {})], 4), ([write(("A", "completed"))], 5)):
            reader.tails.clear()
            append("b", events)
            body = await settled(client)
            assert rows_of(body)["b"]["lastSeq"] == last_seq  # the list saw the appends
            reads.append(sorted(reader.tails))
        return reads

    with mock.patch.object(_fleet, "REFRESH", 3600.0):  # a loaded machine takes its time
        after_notes, after_a_write = run(create_app(reader), calls)
    assert after_notes == []
    assert after_a_write == ["b"]


def taken(kind: str, content: str, ident: str) -> tuple[str, dict[str, Any]]:
    """A person's request, taken and told to the model (``request/taken``)."""
    request = {"id": ident, "kind": kind, "content": content, "by": "grace", "planSeq": 1}
    return ("request/taken", {**request, "at": 0, "told": True})


def check_a_turn_ended_without_honouring_a_request_shows_it(
    source: str | Path, append: Append, *, refresh: float
) -> None:
    """A turn/end is no plan event, yet it settles a told request ``not_honoured``: the list
    reads the session again, at once when its last read saw the request pending
    (``refresh`` large), and after :data:`_fleet.REFRESH` when it did not (``refresh`` 0)."""
    append("b", [TURN, write(("A", "pending"))])
    if refresh:
        append("b", [taken("done", "A", "r1")])
    reader = open_reader(source)

    async def calls(client: httpx.AsyncClient) -> tuple[Any, Any]:
        before = rows_of(await settled(client))["b"]["signals"]
        if not refresh:
            append("b", [taken("done", "A", "r1")])
            await settled(client)
        append("b", [("turn/end", {})])
        deadline = time.monotonic() + 10
        while True:
            after = rows_of(await settled(client))["b"]["signals"]
            if after or time.monotonic() > deadline:
                return before, after
            await asyncio.sleep(0.02)

    with mock.patch.object(_fleet, "REFRESH", refresh):
        before, after = run(create_app(reader), calls)
    assert before == []
    assert [(s["kind"], s["items"]) for s in after] == [("not_honoured", ["A"])]


def check_a_stuck_run_older_than_the_window_says_at_least(
    source: str | Path, append: Append, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run under way before the writes read was once counted from the first of them, at
    a seq where it was not reached: the signal now says so."""
    monkeypatch.setattr(fleet, "MAX_TURN_WRITES", 10)
    monkeypatch.setattr(fleet, "PAGE", 5)
    # 20 writes (seqs 1 to 20), "A" in progress in each, the list growing so none repeats
    growing = [
        write(("A", "in_progress"), *((f"step {k}", "pending") for k in range(n)))
        for n in range(20)
    ]
    append("long", [TURN, *growing])
    append("short", [TURN, *growing[:6]])

    body = run(create_app(source), settled)
    rows = rows_of(body)
    # the window is seqs 11 to 20: the run is seen reaching 5 writes at seq 15
    assert rows["long"]["signals"] == [
        {"kind": "stuck", "seq": 15, "items": ["A"], "count": 5, "atLeast": True}
    ]
    assert rows["short"]["signals"] == [{"kind": "stuck", "seq": 5, "items": ["A"], "count": 5}]


def check_a_row_carries_how_its_run_ended(source: str | Path, append: Append) -> None:
    """A sub-agent whose wrapper wrote its ``session/end`` is listed as ended, with the outcome
    and reason ``dsh-todo sessions`` shows; one written again after it runs again."""
    append("done", [write(("A", "completed")), (SESSION_END_EVENT_TYPE, end_data("finished"))])
    failed = end_data("failed", "search backend down")
    append("broke", [write(("B", "in_progress")), (SESSION_END_EVENT_TYPE, failed)])
    append("again", [write(("C", "pending")), (SESSION_END_EVENT_TYPE, end_data("finished"))])
    append("again", [write(("C", "in_progress"))])
    append("busy", [write(("D", "in_progress"))])

    async def calls(client: httpx.AsyncClient) -> tuple[Any, Any]:
        before = rows_of(await settled(client))
        append("busy", [(SESSION_END_EVENT_TYPE, end_data("finished"))])
        return before, rows_of(await settled(client))

    before, after = run(create_app(source), calls)
    assert {name: row["end"] for name, row in before.items()} == {
        "done": {"outcome": "finished"},
        "broke": {"outcome": "failed", "error": "search backend down"},
        "again": None,
        "busy": None,
    }
    assert after["busy"]["end"] == {"outcome": "finished"}  # the list saw the end appended


def run(app: Any, calls: Callable[[httpx.AsyncClient], Awaitable[Any]]) -> Any:
    """``calls`` against ``app`` in process, with its lifespan."""

    async def main() -> Any:
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url=f"http://{HOST}") as client:
                return await calls(client)

    return asyncio.run(main())
