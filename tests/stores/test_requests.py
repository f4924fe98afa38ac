"""Requests through each store's inbox: filed from outside, taken by the one writer, kept over
restarts of either side, and settled alike on replay (JSONL, PostgreSQL, memory)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsh_tool_todo.core.contract import EVENT_TYPE, REQUEST_TAKEN, TURN_START
from dsh_tool_todo.core.requests import request_states
from dsh_tool_todo.errors import UsageError
from dsh_tool_todo.stores import _inbox, open_session
from dsh_tool_todo.stores._inbox import MAX_WAITING, atake_requests, take_requests
from dsh_tool_todo.stores.jsonl import read_events
from dsh_tool_todo.stores.memory import AsyncMemorySession, MemorySession
from dsh_tool_todo.stores.owners import OwnerRegistry
from dsh_tool_todo.stores.requests import PlanRequests
from tests._builders import plan, todo

from .postgres.test_admin import url

Place = tuple[str, str]  # (source, session name)


@pytest.fixture(params=["jsonl", "postgres"])
def place(request: pytest.FixtureRequest, tmp_path: Path) -> Place:
    if request.param == "jsonl":
        return str(tmp_path), "ada"
    return url(request.getfixturevalue("pg_dsn")), "ada"


@contextmanager
def writer(where: Place) -> Iterator[Any]:
    with open_session(*where) as session:
        yield session


def events_of(where: Place) -> list[dict[str, Any]]:
    source, name = where
    if not source.startswith("postgresql://"):
        return read_events(os.path.join(source, f"{name}.jsonl"))
    from dsh_tool_todo.stores.postgres import read_tail

    return read_tail(source, name, limit=10_000)


def test_a_request_waits_until_the_writer_takes_it_and_is_told_once(place: Place) -> None:
    with writer(place) as agent:
        agent.append(EVENT_TYPE, plan("Write the tests", "Ship it"))
    asked = PlanRequests(*place).file("done", "Ship it", by="grace")
    assert [r.id for r in PlanRequests(*place).read().waiting] == [asked.id]  # the agent is away
    with writer(place) as agent:  # a restart of the agent's side: it finds the request
        assert take_requests(agent) == [asked]
        assert take_requests(agent) == []  # told once
    with writer(place) as agent:  # and a restart does not take it twice
        assert take_requests(agent) == []
        agent.append(EVENT_TYPE, {"todos": [todo("Write the tests"), todo("Ship it", "completed")]})
    found = PlanRequests(*place).read()
    assert found.waiting == []
    assert [(s.request.id, s.status, s.notified) for s in found.taken] == [
        (asked.id, "honoured", True)
    ]
    kinds = [e["type"] for e in events_of(place)]
    assert kinds == [EVENT_TYPE, REQUEST_TAKEN, EVENT_TYPE]  # taken and told in one event


def test_a_request_for_an_item_not_in_the_plan_is_refused_and_files_nothing(place: Place) -> None:
    with writer(place) as agent:
        agent.append(EVENT_TYPE, plan("Ship it"))
    with pytest.raises(UsageError, match="the plan has no item 'Deploy'"):
        PlanRequests(*place).file("done", "Deploy", by="grace")
    assert PlanRequests(*place).read().waiting == []


def test_a_full_inbox_refuses_more_until_the_agent_takes_them(place: Place) -> None:
    with writer(place) as agent:
        agent.append(EVENT_TYPE, plan("Ship it"))
    for n in range(MAX_WAITING):
        PlanRequests(*place).file("note", f"note {n}", by="grace")
    with pytest.raises(UsageError, match=f"{MAX_WAITING} requests wait for this agent already"):
        PlanRequests(*place).file("note", "one more", by="grace")
    with writer(place) as agent:
        assert len(take_requests(agent)) == 10  # one notice's worth: the rest wait
    PlanRequests(*place).file("note", "one more", by="grace")


def test_a_request_withdrawn_before_it_is_taken_is_passed_over_and_one_after_is_settled(
    place: Place,
) -> None:
    with writer(place) as agent:
        agent.append(EVENT_TYPE, plan("Ship it"))
    first = PlanRequests(*place).file("remove", "Ship it", by="grace")
    second = PlanRequests(*place).file("add", "Tell the team", by="grace")
    PlanRequests(*place).withdraw(first.id, by="grace")
    assert [r.id for r in PlanRequests(*place).read().waiting] == [second.id]
    with pytest.raises(UsageError, match="no pending request 'nope'"):
        PlanRequests(*place).withdraw("nope", by="grace")
    with writer(place) as agent:
        assert take_requests(agent) == [second]
    PlanRequests(*place).withdraw(second.id, by="grace")
    with writer(place) as agent:
        assert take_requests(agent) == []
    statuses = {s.request.id: s.status for s in PlanRequests(*place).read().taken}
    assert statuses == {second.id: "withdrawn"}  # the first never reached the log


def test_replay_settles_the_same_on_both_stores(tmp_path: Path, pg_dsn: str) -> None:
    places = [(str(tmp_path), "ada"), (url(pg_dsn), "ada")]
    for where in places:
        with writer(where) as agent:
            agent.append(EVENT_TYPE, plan("A", "B"))
        PlanRequests(*where).file("done", "A", by="grace")
        PlanRequests(*where).file("note", "use staging", by="grace")
        with writer(where) as agent:
            take_requests(agent)
            agent.append(EVENT_TYPE, {"todos": [todo("A", "completed"), todo("B")]})
            agent.append(TURN_START, {})
    answers = [
        [
            (s.request.kind, s.status, s.taken_seq, s.settled_seq)
            for s in request_states(events_of(where))
        ]
        for where in places
    ]
    assert answers[0] == answers[1] == [("done", "honoured", 1, 3), ("note", "delivered", 2, 2)]


def test_a_torn_line_in_a_jsonl_inbox_is_skipped_and_the_next_request_kept(tmp_path: Path) -> None:
    where = (str(tmp_path), "ada")
    with writer(where) as agent:
        agent.append(EVENT_TYPE, plan("Ship it"))
    inbox = tmp_path / "ada.jsonl.requests"
    inbox.write_bytes(b'{"id": "torn", "kind": "no')  # a filer killed mid-write
    asked = PlanRequests(*where).file("note", "still here", by="grace")
    assert inbox.read_bytes().count(b"\n") == 2
    with writer(where) as agent:
        assert take_requests(agent) == [asked]


def test_the_inbox_is_a_file_beside_the_log_that_no_listing_takes_for_a_log(tmp_path: Path) -> None:
    from dsh_tool_todo.stores import open_fleet

    where = (str(tmp_path), "ada")
    with writer(where) as agent:
        agent.append(EVENT_TYPE, plan("Ship it"))
    PlanRequests(*where).file("note", "hi", by="grace")
    assert sorted(os.listdir(tmp_path)) == ["ada.jsonl", "ada.jsonl.requests"]
    header, line = (tmp_path / "ada.jsonl.requests").read_text().splitlines()
    assert list(json.loads(header)) == ["inboxId"]  # names the file: a replaced one is told apart
    assert json.loads(line)["content"] == "hi"
    assert open_fleet(str(tmp_path))[1] == ["ada"]


def test_a_memory_session_takes_requests_filed_in_process() -> None:
    session = MemorySession()
    session.append(EVENT_TYPE, plan("Ship it"))
    session.requests.file(
        {"id": "r1", "kind": "done", "content": "Ship it", "by": "g", "planSeq": 0, "at": 0}
    )
    assert [r.id for r in take_requests(session)] == ["r1"]
    assert [e["type"] for e in session.events] == [EVENT_TYPE, REQUEST_TAKEN]
    assert session.events[1]["data"]["told"] is True


def test_an_async_session_takes_through_the_async_path() -> None:
    asyncio.run(_async_session_takes())


class SuspendingSession(AsyncMemorySession):
    """A session whose reads wait on I/O, as an async database session's do."""

    async def alatest(self, types: tuple[str, ...]) -> Any:
        await asyncio.sleep(0)
        return self.latest(types)


async def _async_session_takes() -> None:
    session = SuspendingSession()
    await session.append(EVENT_TYPE, plan("Ship it"))
    session.requests.file(
        {"id": "r1", "kind": "note", "content": "hi", "by": "g", "planSeq": 0, "at": 0}
    )
    with pytest.raises(UsageError, match="await atake_requests"):
        take_requests(session)
    assert len(session.events) == 1  # refused before it took anything
    assert [r.id for r in await atake_requests(session)] == ["r1"]
    assert request_states(session.events)[0].status == "delivered"


def test_an_owner_registry_takes_for_its_owner_under_its_lock(tmp_path: Path) -> None:
    asyncio.run(_registry_takes(tmp_path))


async def _registry_takes(tmp_path: Path) -> None:
    with OwnerRegistry(tmp_path) as owners:
        with owners.locked("ada") as session:
            session.append(EVENT_TYPE, plan("Ship it"))
        asked = await PlanRequests(tmp_path, "ada").afile("add", "Docs", by="grace")
        assert await owners.atake_requests("ada") == [asked]
        assert owners.take_requests("ada") == []


def test_requests_are_refused_inside_a_running_loop_by_the_sync_functions(tmp_path: Path) -> None:
    async def inside() -> None:
        PlanRequests(tmp_path, "ada").file("note", "x", by="g")

    with writer((str(tmp_path), "ada")) as agent:
        agent.append(EVENT_TYPE, plan("A"))
    with pytest.raises(UsageError, match="await the a-prefixed function"):
        asyncio.run(inside())


def test_a_database_at_version_3_works_on_and_says_how_to_keep_requests(pg_dsn: str) -> None:
    import psycopg

    from dsh_tool_todo.errors import StoreNotReady

    with psycopg.Connection.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("DROP TABLE dsh_todo_requests")
        conn.execute("DELETE FROM dsh_todo_schema WHERE version = 4")
    where = (url(pg_dsn), "ada")
    with writer(where) as agent:
        agent.append(EVENT_TYPE, plan("Ship it"))
        assert take_requests(agent) == []  # no table: nothing can wait
    with pytest.raises(StoreNotReady, match=r"keeps no requests yet.*dsh-todo db init"):
        PlanRequests(*where).file("note", "hi", by="grace")


def test_the_same_request_twice_is_refused_while_the_first_is_open(place: Place) -> None:
    with writer(place) as agent:
        agent.append(EVENT_TYPE, plan("Ship it"))
    first = PlanRequests(*place).file("done", "Ship it", by="grace")
    with pytest.raises(UsageError, match=f"the same request is open already \\({first.id}"):
        PlanRequests(*place).file("done", "ship  IT", by="alan")
    with writer(place) as agent:
        take_requests(agent)  # taken, still pending: still open
    with pytest.raises(UsageError, match="the same request is open already"):
        PlanRequests(*place).file("done", "Ship it", by="alan")
    assert len(PlanRequests(*place).read().taken) == 1


# --- replay over generated histories, on both stores -------------------------------------

STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("write"), st.lists(st.sampled_from(["A", "B", "C"]), unique=True)),
        st.tuples(st.just("complete"), st.sampled_from(["A", "B", "C"])),
        st.tuples(
            st.just("ask"),
            st.sampled_from(["done", "remove", "add", "note"]),
            st.sampled_from(["A", "B", "D"]),
        ),
        st.tuples(st.just("take")),
        st.tuples(st.just("turn")),
    ),
    max_size=12,
)


def _play(where: Place, steps: list[tuple[Any, ...]]) -> list[tuple[str, str, int | None]]:
    """Drive one session through ``steps`` (a person asks, the agent takes, writes, turns)."""
    plan_now: dict[str, str] = {}
    with writer(where) as agent:
        agent.append(EVENT_TYPE, {"todos": []})
    for step in steps:
        if step[0] == "ask":
            with contextlib.suppress(UsageError):  # refused: nothing filed (tested above)
                PlanRequests(*where).file(step[1], step[2], by="grace")
            continue
        with writer(where) as agent:
            if step[0] == "take":
                take_requests(agent)
            elif step[0] == "turn":
                agent.append(TURN_START, {})
                plan_now = {}
            else:
                if step[0] == "write":
                    plan_now = {c: plan_now.get(c, "pending") for c in step[1]}
                elif step[1] in plan_now:
                    plan_now[step[1]] = "completed"
                agent.append(EVENT_TYPE, {"todos": [todo(c, s) for c, s in plan_now.items()]})
    return [
        (s.request.kind + ":" + s.request.content, s.status, s.settled_seq)
        for s in request_states(events_of(where))
    ]


@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(steps=STEPS)
def test_replay_gives_the_same_answers_on_jsonl_and_postgresql(
    steps: list[tuple[Any, ...]], tmp_path: Path, pg_dsn: str
) -> None:
    name = f"s{uuid.uuid4().hex[:12]}"
    jsonl = _play((str(tmp_path), name), steps)
    database = _play((url(pg_dsn), name), steps)
    assert jsonl == database


def test_a_take_tells_at_most_one_notice_worth_and_the_rest_wait_for_the_next(
    tmp_path: Path,
) -> None:
    from dsh_tool_todo.core.requests import MAX_TOLD

    where = (str(tmp_path), "ada")
    with writer(where) as agent:
        agent.append(EVENT_TYPE, plan("Ship it"))
    filed = [PlanRequests(*where).file("note", f"note {n}", by="g") for n in range(MAX_TOLD + 2)]
    with writer(where) as agent:
        assert take_requests(agent) == filed[:MAX_TOLD]
        assert take_requests(agent) == filed[MAX_TOLD:]
        assert take_requests(agent) == []
    assert all(s.status == "delivered" for s in PlanRequests(*where).read().taken)


def test_a_pruned_or_deleted_session_takes_its_requests_with_it(
    tmp_path: Path, pg_dsn: str
) -> None:
    import psycopg

    from dsh_tool_todo.stores import open_database, prune_logs

    logs = (str(tmp_path), "ada")
    with writer(logs) as agent:
        agent.append(EVENT_TYPE, plan("Ship it"))
    PlanRequests(*logs).file("note", "hi", by="grace")
    long_ago = 10 * 86400  # seconds since the epoch: 1970
    os.utime(tmp_path / "ada.jsonl", (long_ago, long_ago))
    assert [name for name, _ in prune_logs(str(tmp_path), 1)[1]] == ["ada"]
    assert os.listdir(tmp_path) == []

    database = (url(pg_dsn), "ada")
    with writer(database) as agent:
        agent.append(EVENT_TYPE, plan("Ship it"))
    PlanRequests(*database).file("note", "hi", by="grace")
    assert open_database(url(pg_dsn)).delete_session("ada") == 1
    with psycopg.Connection.connect(pg_dsn) as conn:
        assert conn.execute("SELECT count(*) FROM dsh_todo_requests").fetchone() == (0,)


# --- what a hostile pass found: concurrency, replaced inboxes, special files ---------------


def test_concurrent_filers_keep_the_cap_exact_and_a_taking_writer_loses_none(
    place: Place, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    from dsh_tool_todo.stores import requests

    monkeypatch.setattr(requests, "MAX_WAITING", 5)  # 12 filers: within a server's connections

    with writer(place) as agent:
        agent.append(EVENT_TYPE, plan("Ship it"))
    filed: list[str] = []
    refused: list[str] = []

    def file(n: int) -> None:
        try:
            filed.append(PlanRequests(*place).file("note", f"note {n}", by="g").id)
        except UsageError as error:
            refused.append(str(error))

    threads = [threading.Thread(target=file, args=(n,)) for n in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(filed) == 5
    assert {"5 requests wait" in reason for reason in refused} == {True}
    with writer(place) as agent:
        taken = [r.id for r in take_requests(agent)]
    assert sorted(taken) == sorted(filed)


def test_an_inbox_deleted_after_a_take_keeps_the_next_requests(tmp_path: Path) -> None:
    where = (str(tmp_path), "ada")
    with writer(where) as agent:
        agent.append(EVENT_TYPE, plan("Ship it"))
    for n in range(3):
        PlanRequests(*where).file("note", f"old {n}", by="g")
    with writer(where) as agent:
        assert len(take_requests(agent)) == 3
    (tmp_path / "ada.jsonl.requests").unlink()  # a person tidies the directory
    fresh = PlanRequests(*where).file("note", "new", by="g")
    assert [r.id for r in PlanRequests(*where).read().waiting] == [fresh.id]
    with writer(where) as agent:
        assert take_requests(agent) == [fresh]


def test_an_inbox_that_is_a_fifo_is_never_waited_on(tmp_path: Path) -> None:
    where = (str(tmp_path), "ada")
    with writer(where) as agent:
        agent.append(EVENT_TYPE, plan("Ship it"))
    os.mkfifo(tmp_path / "ada.jsonl.requests")
    assert PlanRequests(*where).read().waiting == []
    with pytest.raises(UsageError, match="is not a regular file: move it aside"):
        PlanRequests(*where).file("note", "hi", by="g")
    with writer(where) as agent:
        assert take_requests(agent) == []


def test_requests_withdrawn_before_a_take_cost_it_nothing(tmp_path: Path) -> None:
    where = (str(tmp_path), "ada")
    with writer(where) as agent:
        agent.append(EVENT_TYPE, plan("Ship it"))
    for n in range(30):
        asked = PlanRequests(*where).file("note", f"note {n}", by="g")
        PlanRequests(*where).withdraw(asked.id, by="g")
    live = PlanRequests(*where).file("done", "Ship it", by="g")
    with writer(where) as agent:
        assert take_requests(agent) == [live]
    kinds = [e["type"] for e in events_of(where)]
    assert kinds == [EVENT_TYPE, REQUEST_TAKEN]  # the withdrawn ones never reached the log


def test_an_inbox_line_filing_would_refuse_is_never_taken(tmp_path: Path) -> None:
    where = (str(tmp_path), "ada")
    with writer(where) as agent:
        agent.append(EVENT_TYPE, plan("Ship it"))
    bad = {"id": "x", "kind": "note", "content": "a\x00b", "by": "g", "planSeq": 0, "at": 0}
    long = {**bad, "id": "y", "content": "z" * 301}
    with open(tmp_path / "ada.jsonl.requests", "w", encoding="utf-8") as inbox:
        inbox.write(json.dumps(bad) + "\n" + json.dumps(long) + "\n")
    kept = PlanRequests(*where).file("note", "fine", by="g")
    with writer(where) as agent:
        assert take_requests(agent) == [kept]


def test_a_take_logs_in_inbox_order_so_no_position_passes_an_entry_not_logged(
    place: Place,
) -> None:
    with writer(place) as agent:
        agent.append(EVENT_TYPE, plan("Ship it", "Docs"))
    first = PlanRequests(*place).file("done", "Ship it", by="g")
    with writer(place) as agent:
        take_requests(agent)
    later = PlanRequests(*place).file("done", "Docs", by="g")
    PlanRequests(*place).withdraw(first.id, by="g")  # after `later` in the inbox
    with writer(place) as agent:
        assert take_requests(agent) == [later]
    logged = [e for e in events_of(place) if e["type"].startswith("request/")]
    assert [e["data"].get("id") for e in logged] == [first.id, later.id, first.id]
    positions = [e["data"]["inbox"] for e in logged]
    assert positions == sorted(positions)


def test_the_first_take_after_a_session_opens_reads_the_inbox_once(
    place: Place, monkeypatch: pytest.MonkeyPatch
) -> None:
    with writer(place) as agent:
        agent.append(EVENT_TYPE, plan("Ship it", "Docs"))
    PlanRequests(*place).file("done", "Ship it", by="g")
    with writer(place) as agent:
        take_requests(agent)
    later = PlanRequests(*place).file("done", "Docs", by="g")
    reads: list[int] = []
    read = _inbox._read

    async def counted(session: Any, inbox: Any, position: int, identity: str | None) -> Any:
        reads.append(position)
        return await read(session, inbox, position, identity)

    monkeypatch.setattr(_inbox, "_read", counted)
    with writer(place) as agent:  # opened again: where the log stopped is not known yet
        assert take_requests(agent) == [later]
        assert take_requests(agent) == []
    assert reads[0] == 0  # from the start: whether anything waits, before the log is asked
    assert len(reads) == 2  # one read each take


HOSTILE_LINES = [
    # a request whose time no float holds
    {"id": "huge", "kind": "note", "content": "x", "by": "eve", "planSeq": -1, "at": 10**400},
    # a request that also names an id to withdraw no dict can hold
    {"id": "both", "kind": "note", "content": "x", "by": "eve", "planSeq": -1, "at": 0,
     "withdraw": [1]},
]  # fmt: skip


def test_inbox_lines_no_filer_writes_are_passed_over_by_filing_listing_and_taking(
    tmp_path: Path,
) -> None:
    where = (str(tmp_path), "ada")
    with writer(where) as agent:
        agent.append(EVENT_TYPE, plan("Ship it"))
    PlanRequests(*where).file("note", "first", by="grace")
    with (tmp_path / "ada.jsonl.requests").open("a") as inbox:
        for line in HOSTILE_LINES:
            inbox.write(json.dumps(line) + "\n")
    asked = PlanRequests(*where).file("note", "still here", by="grace")
    assert [r.content for r in PlanRequests(*where).read().waiting] == ["first", "still here"]
    with writer(where) as agent:
        assert [r.content for r in take_requests(agent)] == ["first", "still here"]
    assert asked.content == "still here"


def test_a_taken_request_no_filer_could_write_is_passed_over_by_every_reader(
    tmp_path: Path,
) -> None:
    from dsh_tool_todo.plans._pending import PendingRequests
    from dsh_tool_todo.plans.fleet import turn_asked

    with writer((str(tmp_path), "ada")) as agent:
        agent.append(EVENT_TYPE, plan("Ship it"))
        for line in HOSTILE_LINES[:1]:
            agent.append("request/taken", {**line, "told": True})
        agent.append("turn/end", {})
    events = [json.loads(line) for line in (tmp_path / "ada.jsonl").read_text().splitlines()]
    assert request_states(events) == []
    assert turn_asked(events) == []
    pending = PendingRequests()
    assert all(pending.add(event) or True for event in events)
    assert pending.asked() == []


def test_a_symlink_to_a_log_files_into_the_inbox_its_writer_takes(tmp_path: Path) -> None:
    with writer((str(tmp_path), "real")) as agent:
        agent.append(EVENT_TYPE, plan("Ship it"))
    (tmp_path / "alias.jsonl").symlink_to("real.jsonl")
    PlanRequests(str(tmp_path), "alias").file("note", "through the link", by="grace")
    PlanRequests(str(tmp_path / "alias.jsonl")).file("note", "by its path", by="grace")
    assert not (tmp_path / "alias.jsonl.requests").exists()
    with writer((str(tmp_path), "real")) as agent:
        assert [r.content for r in take_requests(agent)] == ["through the link", "by its path"]


@pytest.mark.parametrize(
    ("by", "message"),
    [("\ud800", "NUL or a lone surrogate"), ("a\x00b", "NUL or a lone surrogate"),
     ("x" * 65, "at most 64 characters")],
)  # fmt: skip
def test_a_withdrawal_checks_who_withdraws_as_a_filing_does(
    tmp_path: Path, by: str, message: str
) -> None:
    where = (str(tmp_path), "ada")
    with writer(where) as agent:
        agent.append(EVENT_TYPE, plan("Ship it"))
    asked = PlanRequests(*where).file("note", "hi", by="grace")
    with pytest.raises(UsageError, match=message):
        PlanRequests(*where).withdraw(asked.id, by=by)
    with pytest.raises(UsageError, match=r"no pending request 'x{40}\.\.\.' of this session"):
        PlanRequests(*where).withdraw("x" * 5000, by="grace")
    assert [r.id for r in PlanRequests(*where).read().waiting] == [asked.id]
