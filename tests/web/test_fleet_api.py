"""The fleet in the web API: parents and health signals per row, a session's family."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Collection
from pathlib import Path
from typing import Any

import httpx
import pytest

from dsh_tool_todo.protocols import TailPage
from dsh_tool_todo.stores.jsonl import JsonlReader, JsonlSession
from dsh_tool_todo.web._fleet import SignalCache
from dsh_tool_todo.web.app import create_app

from ._readers import (
    DROPPED,
    Append,
    Events,
    check_a_row_carries_how_its_run_ended,
    check_a_stuck_run_older_than_the_window_says_at_least,
    check_a_turn_ended_without_honouring_a_request_shows_it,
    check_signals_are_read_again_only_after_a_plan_event,
    check_signals_not_read_yet_are_pending,
    rows_of,
    settled,
)
from .conftest import NOTE, TURN, plan_write, run_requests, todo, write_log


def linked(path: Path, parent: str | None, *events: tuple[str, dict[str, Any]]) -> None:
    with JsonlSession(path, parent=parent) as session:
        for kind, data in events:
            session.append(kind, data)


def dropping() -> list[tuple[str, dict[str, Any]]]:
    """A turn whose second write drops an unfinished item: a ``dropped`` signal at seq 3."""
    return [TURN, plan_write(todo("A"), todo("B")), plan_write(todo("A", "in_progress"))]


class CountingReader(JsonlReader):
    """A JSONL reader that counts the logs read back from their end (signals, lookups)."""

    tails: list[str]

    def __post_init__(self) -> None:
        super().__post_init__()
        self.tails = []

    async def tail(
        self, name: str, *, before: int | None, limit: int, types: Collection[str] | None = None
    ) -> TailPage:
        self.tails.append(name)
        return await super().tail(name, before=before, limit=limit, types=types)


class SlowReader(CountingReader):
    """A reader whose reads back from the end take ``delay`` seconds."""

    delay = 0.3

    async def tail(
        self, name: str, *, before: int | None, limit: int, types: Collection[str] | None = None
    ) -> TailPage:
        await asyncio.sleep(self.delay)
        return await super().tail(name, before=before, limit=limit, types=types)


def test_a_list_waits_for_signals_only_its_budget_then_rings_when_they_are_known(
    tmp_path: Path,
) -> None:
    linked(tmp_path / "worker.jsonl", None, *dropping())
    reader = SlowReader(tmp_path)

    async def main() -> tuple[Any, ...]:
        rung: list[frozenset[str]] = []
        known = asyncio.Event()

        def on_late(names: frozenset[str]) -> None:
            rung.append(names)
            known.set()

        cache = SignalCache(reader, budget=0.01, on_late=on_late)
        rows, _ = await reader.sessions("", 10)
        first = await cache.signals(rows)
        await asyncio.wait_for(known.wait(), 5)
        reader.tails.clear()
        second = await cache.signals(rows)
        await reader.aclose()
        return first, rung, second, list(reader.tails)

    first, rung, second, tails = asyncio.run(main())
    assert first == [None]
    assert rung == [frozenset({"worker"})]
    assert second == [[{"kind": "dropped", "seq": 2, "items": ["B"], "count": 1}]]
    assert tails == []  # the second list is answered from what the first one read


def test_rows_carry_their_parent_and_the_signals_of_their_current_turn(tmp_path: Path) -> None:
    linked(tmp_path / "lead.jsonl", None, TURN, plan_write(todo("plan", "in_progress")))
    linked(tmp_path / "worker.jsonl", "lead", *dropping())

    async def calls(client: httpx.AsyncClient) -> dict[str, Any]:
        return await settled(client)

    body = run_requests(create_app(tmp_path), calls)
    rows = rows_of(body)
    assert rows["lead"]["parent"] is None
    assert rows["lead"]["signals"] == []
    assert rows["worker"]["parent"] == "lead"
    assert rows["worker"]["signals"] == [{"kind": "dropped", "seq": 3, "items": ["B"], "count": 1}]
    assert body["unlistedParents"] == {}


def test_signals_are_read_again_only_for_the_rows_that_changed(tmp_path: Path) -> None:
    for name in ("a", "b", "c"):
        linked(tmp_path / f"{name}.jsonl", None, TURN, plan_write(todo("x")))
    reader = CountingReader(tmp_path)

    async def calls(client: httpx.AsyncClient) -> list[list[str]]:
        seen = []
        await settled(client)
        seen.append(sorted(reader.tails))
        reader.tails.clear()
        await client.get("/api/sessions")
        seen.append(sorted(reader.tails))
        with JsonlSession(tmp_path / "b.jsonl") as session:
            session.append(*plan_write(todo("x", "completed")))
        reader.tails.clear()
        body = await settled(client)
        seen.append(sorted(reader.tails))
        assert rows_of(body)["b"]["progress"]["completed"] == 1
        return seen

    first, unchanged, after_write = run_requests(create_app(reader), calls)
    assert first == ["a", "b", "c"]
    assert unchanged == []
    assert after_write == ["b"]


def test_a_parent_outside_the_list_is_said_to_be_served_or_not(tmp_path: Path) -> None:
    linked(tmp_path / "orphan.jsonl", "gone", plan_write(todo("x")))
    linked(tmp_path / "far.jsonl", "elder", plan_write(todo("x")))
    linked(tmp_path / "elder.jsonl", None, plan_write(todo("x")))

    async def calls(client: httpx.AsyncClient) -> list[dict[str, Any]]:
        filtered = (await client.get("/api/sessions", params={"q": "r"})).json()
        orphan = (await client.get("/api/sessions/orphan/family")).json()
        elder = (await client.get("/api/sessions/elder/family")).json()
        return [filtered, orphan, elder]

    filtered, orphan, elder = run_requests(create_app(tmp_path), calls)
    assert filtered["unlistedParents"] == {"gone": False}
    assert orphan == {
        "session": "orphan",
        "parent": "gone",
        "parentVisible": False,
        "children": [],
        "childrenComplete": True,
    }
    assert elder["parent"] is None
    assert elder["children"] == ["far"]


def test_a_parent_further_down_than_the_rows_shown_is_served(tmp_path: Path) -> None:
    linked(tmp_path / "old-lead.jsonl", None, plan_write(todo("x")))
    linked(tmp_path / "kid.jsonl", "old-lead", plan_write(todo("x")))

    async def calls(client: httpx.AsyncClient) -> dict[str, Any]:
        return (await client.get("/api/sessions", params={"q": "kid"})).json()

    body = run_requests(create_app(tmp_path), calls)
    assert [row["name"] for row in body["sessions"]] == ["kid"]
    assert body["unlistedParents"] == {"old-lead": True}


def test_a_link_cycle_and_hostile_names_are_answered_as_written(tmp_path: Path) -> None:
    hostile = '<img src=x onerror="alert(1)">\x1b[2J'
    linked(tmp_path / "a.jsonl", "b", plan_write(todo("x")))
    linked(tmp_path / "b.jsonl", "a", plan_write(todo("y")))
    linked(tmp_path / "child.jsonl", hostile, plan_write(todo(hostile, "in_progress")))

    async def calls(client: httpx.AsyncClient) -> list[dict[str, Any]]:
        listed = await settled(client)
        a = (await client.get("/api/sessions/a/family")).json()
        child = (await client.get("/api/sessions/child/family")).json()
        return [listed, a, child]

    listed, a, child = run_requests(create_app(tmp_path), calls)
    rows = rows_of(listed)
    assert rows["a"]["parent"] == "b"
    assert rows["b"]["parent"] == "a"
    assert rows["child"]["workingOn"] == hostile
    assert listed["unlistedParents"] == {hostile: False}
    assert a["parent"] == "b"
    assert a["parentVisible"] is True
    assert a["children"] == ["b"]
    assert child["parent"] == hostile
    assert child["parentVisible"] is False


def test_the_family_of_an_unknown_session_is_a_404(tmp_path: Path) -> None:
    async def calls(client: httpx.AsyncClient) -> httpx.Response:
        return await client.get("/api/sessions/nobody/family")

    response = run_requests(create_app(tmp_path), calls)
    assert response.status_code == 404
    assert response.json() == {"error": "no session 'nobody' is served"}


def test_a_log_that_became_unreadable_is_not_shown_from_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dsh_tool_todo.stores.jsonl import _tail

    linked(tmp_path / "worker.jsonl", None, *dropping())
    opened = _tail.open_log

    def refuse(path: str) -> Any:
        if os.stat(path).st_mode & 0o444 == 0:  # as chmod 000 refuses anyone but root
            raise PermissionError(13, "Permission denied", path)
        return opened(path)

    monkeypatch.setattr(_tail, "open_log", refuse)

    async def calls(client: httpx.AsyncClient) -> tuple[dict[str, Any], dict[str, Any]]:
        before = await settled(client)
        os.chmod(tmp_path / "worker.jsonl", 0)  # changes the ctime only, not size or mtime
        after = await settled(client)
        return before, after

    before, after = run_requests(create_app(tmp_path), calls)
    assert rows_of(before)["worker"]["signals"] == [
        {"kind": "dropped", "seq": 2, "items": ["B"], "count": 1}
    ]
    row = rows_of(after)["worker"]
    assert (row["progress"], row["signals"]) == (None, [])


def test_a_served_list_held_from_start_shows_what_changed_before_each_ask(tmp_path: Path) -> None:
    """``warm_list`` (what ``dsh-todo serve`` does): the list's index is read at start and
    then only where the watcher saw changes; a log written, deleted, or deleted and created
    again just before a list is asked for shows so in that list."""
    for name in ("kept", "gone", "again"):
        linked(tmp_path / f"{name}.jsonl", None, plan_write(todo("A", "in_progress")))
    app = create_app(tmp_path, warm_list=True)

    async def calls(client: httpx.AsyncClient) -> tuple[dict[str, Any], dict[str, Any]]:
        first = rows_of((await client.get("/api/sessions")).json())
        linked(tmp_path / "kept.jsonl", None, plan_write(todo("B", "in_progress")))
        (tmp_path / "gone.jsonl").unlink()
        (tmp_path / "again.jsonl").unlink()
        linked(tmp_path / "again.jsonl", "kept")
        linked(tmp_path / "new.jsonl", "kept", plan_write(todo("C", "in_progress")))
        second = rows_of((await client.get("/api/sessions")).json())
        return first, second

    first, second = run_requests(app, calls)
    assert {name: row["workingOn"] for name, row in first.items()} == dict.fromkeys(
        ("kept", "gone", "again"), "A"
    )
    assert {name: (row["workingOn"], row["parent"]) for name, row in second.items()} == {
        "kept": ("B", None),
        "again": (None, "kept"),
        "new": ("C", "kept"),
    }


@pytest.fixture
def append_jsonl(tmp_path: Path) -> Append:
    def append(name: str, events: Events) -> None:
        with JsonlSession(tmp_path / f"{name}.jsonl") as session:
            for kind, data in events:
                session.append(kind, data)

    return append


def test_a_row_whose_signals_are_not_read_yet_gives_an_empty_list_marked_pending(
    tmp_path: Path, append_jsonl: Append
) -> None:
    check_signals_not_read_yet_are_pending(tmp_path, append_jsonl)


def test_signals_are_read_again_only_after_a_plan_event(
    tmp_path: Path, append_jsonl: Append
) -> None:
    check_signals_are_read_again_only_after_a_plan_event(tmp_path, append_jsonl)


@pytest.mark.parametrize("refresh", [3600.0, 0.0], ids=["seen-pending", "taken-since"])
def test_a_turn_ended_without_honouring_a_request_shows_it_in_the_list(
    tmp_path: Path, append_jsonl: Append, refresh: float
) -> None:
    check_a_turn_ended_without_honouring_a_request_shows_it(tmp_path, append_jsonl, refresh=refresh)


def test_a_stuck_run_older_than_the_writes_read_says_at_least(
    tmp_path: Path, append_jsonl: Append, monkeypatch: pytest.MonkeyPatch
) -> None:
    check_a_stuck_run_older_than_the_window_says_at_least(tmp_path, append_jsonl, monkeypatch)


def test_a_row_says_how_its_delegated_run_ended(tmp_path: Path, append_jsonl: Append) -> None:
    check_a_row_carries_how_its_run_ended(tmp_path, append_jsonl)


def test_a_log_replaced_by_a_shorter_one_with_the_same_plan_seq_is_read_again(
    tmp_path: Path, append_jsonl: Append
) -> None:
    """The signals are kept by the newest plan event's seq: a log that went back (replaced,
    cut short) is read again even when its plan event sits at the same seq."""
    append_jsonl("worker", [*dropping(), NOTE, NOTE])
    shorter = [TURN, plan_write(todo("A"), todo("D")), plan_write(todo("A", "in_progress"))]

    async def calls(client: httpx.AsyncClient) -> tuple[dict[str, Any], dict[str, Any]]:
        before = await settled(client)
        write_log(tmp_path / "new.jsonl", shorter)
        os.replace(tmp_path / "new.jsonl", tmp_path / "worker.jsonl")
        return before, await settled(client)

    before, after = run_requests(create_app(tmp_path), calls)
    assert rows_of(before)["worker"]["signals"] == [DROPPED]
    assert rows_of(after)["worker"]["signals"] == [{**DROPPED, "items": ["D"]}]


@pytest.mark.parametrize("replaced_by", ["nothing", "a file"])
def test_a_served_directory_that_goes_away_answers_a_json_503_then_comes_back(
    tmp_path: Path, replaced_by: str
) -> None:
    served = tmp_path / "logs"
    served.mkdir()
    write_log(served / "a.jsonl", [plan_write(todo("A"))])
    app = create_app(served)

    async def calls(client: httpx.AsyncClient) -> list[tuple[int, str, Any]]:
        answers = []
        (served / "a.jsonl").unlink()
        served.rmdir()
        if replaced_by == "a file":
            served.write_text("")
        for path in ("/api/sessions", "/api/sessions?q=a"):
            answer = await client.get(path)
            answers.append((answer.status_code, answer.headers["content-type"], answer.json()))
        if replaced_by == "a file":
            served.unlink()
        served.mkdir()
        write_log(served / "b.jsonl", [plan_write(todo("B"))])
        answer = await client.get("/api/sessions")
        answers.append((answer.status_code, "", sorted(rows_of(answer.json()))))
        return answers

    gone, searched, back = run_requests(app, calls)
    for status, kind, body in (gone, searched):
        assert (status, kind) == (503, "application/json")
        assert "the directory of session logs is gone" in body["error"]
    assert back == (200, "", ["b"])
