"""Sub-agent links through the reference host and the owner registry."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

import dsh_tool_todo
from dsh_tool_todo.core.contract import EVENT_TYPE, LINK_EVENT_TYPE, TURN_START
from dsh_tool_todo.core.links import Link, link_data, link_of
from dsh_tool_todo.errors import LinkConflict, UsageError
from dsh_tool_todo.host import Host, MemorySession
from dsh_tool_todo.stores.jsonl import JsonlReader, JsonlSession, read_events
from dsh_tool_todo.stores.owners import OwnerRegistry
from tests._builders import make_event, options, todo, todos

PLAN = todos(todo("Search", "in_progress"))


def new_host() -> Host:
    return Host([dsh_tool_todo], options(False))


def test_a_child_agent_names_its_parent_agent_and_keeps_its_own_plan() -> None:
    host = new_host()
    lead = host.new_agent(MemorySession(key="lead"))
    child = host.new_agent(parent=lead, parent_call_id="call_1")
    host.call_tool("todo_write", PLAN, agent=child)
    assert child.session.events[0] == {
        "seq": 0,
        "type": "session/link",
        "data": {"parent": "lead", "parentCallId": "call_1"},
    }
    assert host.projection(child.session, "todos") == PLAN["todos"]
    assert host.projection(lead.session, "todos") is None  # nothing reaches the parent


def test_a_parent_agent_without_a_key_or_a_session_without_link_is_refused() -> None:
    host = new_host()
    nameless = host.new_agent()
    with pytest.raises(UsageError, match="has no key to name it by"):
        host.new_agent(parent=nameless)
    with pytest.raises(UsageError, match="pass parent= too"):
        host.new_agent(parent_call_id="call_1")

    class Plain:
        def __init__(self) -> None:
            self.events: list[object] = []

        def append(self, type: str, data: object, /) -> object:
            self.events.append((type, data))
            return None

        def subscribe(self, listener: object, /) -> object:
            return lambda: None

    plain = Plain()
    with pytest.raises(UsageError, match="cannot record a parent"):
        host.new_agent(plain, parent="lead")  # type: ignore[arg-type]
    assert plain.events == []


def test_new_agent_on_a_reopened_log_checks_its_link(tmp_path: Path) -> None:
    host = new_host()
    with JsonlSession(tmp_path / "child.jsonl") as session:
        agent = host.new_agent(session, parent="lead")
        host.call_tool("todo_write", PLAN, agent=agent)
    with JsonlSession(tmp_path / "child.jsonl") as session:
        again = new_host().new_agent(session, parent="lead", parent_call_id="call_9")
        assert again.session is session
        with pytest.raises(LinkConflict, match="started for parent 'lead', not 'other'"):
            new_host().new_agent(session, parent="other")
    assert [event["type"] for event in read_events(tmp_path / "child.jsonl")] == [
        LINK_EVENT_TYPE,
        EVENT_TYPE,
    ]


def test_a_refused_link_at_open_leaves_the_log_unlocked_and_unchanged(tmp_path: Path) -> None:
    log = tmp_path / "c.jsonl"
    with JsonlSession(log) as session:
        session.append(TURN_START, {})
    before = log.read_bytes()
    with pytest.raises(LinkConflict, match="holds 1 event and no link"):
        JsonlSession(log, parent="lead")
    assert log.read_bytes() == before
    with JsonlSession(log) as session:  # the refused session let go of the writer lock
        assert session.append("note", {})["seq"] == 1


def test_the_owner_registry_links_owners_by_their_viewer_keys(tmp_path: Path) -> None:
    tool = dsh_tool_todo.todo_write_tool(allow_parallel_in_progress=False)
    with OwnerRegistry(tmp_path) as owners:
        assert owners.key("Lead@x") == "%4cead%40x"
        owners.link("helper", owners.key("Lead@x"), parent_call_id="call_1")
        owners.call("helper", tool, PLAN)
        owners.call("Lead@x", tool, PLAN)
        assert owners.link("helper", owners.key("Lead@x")) is None
        with pytest.raises(LinkConflict, match="not 'someone else'"):
            owners.link("helper", "someone else")
    reader = JsonlReader(tmp_path)
    rows, _ = asyncio.run(reader.sessions("", 10))
    assert {row.name: row.parent for row in rows} == {"helper": "%4cead%40x", "%4cead%40x": None}
    with OwnerRegistry() as memory:
        assert memory.key("a") == "a"
        memory.link("b", memory.key("a"))
        assert memory.session("b").latest(["session/link"])["data"] == {"parent": "a"}  # type: ignore[index]


def test_alink_awaits_an_async_sessions_link() -> None:
    class AsyncLinked(MemorySession):
        async def link(self, parent: str, *, parent_call_id: str | None = None) -> object:  # type: ignore[override]
            return MemorySession.link(self, parent, parent_call_id=parent_call_id)

    async def scenario() -> object:
        async with OwnerRegistry(open_session=lambda key: AsyncLinked(key=key)) as owners:
            event = await owners.alink("child", "lead")
            assert owners.key("child") == "child"
            return event

    event = asyncio.run(scenario())
    assert event == {"seq": 0, "type": "session/link", "data": {"parent": "lead"}}


@pytest.mark.parametrize(
    ("parent", "call_id", "message"),
    [
        ("", None, "parent must be the parent session's key"),
        (None, None, "parent must be"),
        ("x" * 1025, None, "at most 1024 characters"),
        ("p", "", "parent_call_id must be a non-empty string"),
        ("p", "c" * 1025, "parent_call_id must be a non-empty string of at most 1024 characters"),
        ("a\x00b", None, "parent must not hold NUL characters"),
        ("\ud800x", None, "parent must be valid Unicode text"),
        ("p", "c\x00", "parent_call_id must not hold NUL characters"),
        ("p", "\udc80", "parent_call_id must be valid Unicode text"),
    ],
)
def test_bad_links_are_refused(parent: object, call_id: object, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        link_data(parent, call_id)


def test_the_longest_link_a_store_writes_is_read_back_and_a_longer_head_is_not_read_whole(
    tmp_path: Path,
) -> None:
    from dsh_tool_todo.stores.jsonl import _tail

    parent, call_id = "\U0001f600" * 1024, "\x01" * 1024  # 4 and 6 bytes each as JSON
    with JsonlSession(tmp_path / "child.jsonl", parent=parent, parent_call_id=call_id) as child:
        child.append(EVENT_TYPE, todos(todo("A")))
    rows, _ = asyncio.run(JsonlReader(tmp_path).sessions("", 10))
    assert [row.parent for row in rows] == [parent]

    # a first line of 8 MiB: the head is looked for in the first 16 KiB only (the snapshot's
    # own read, from the end, still reads the whole line as the log's last event)
    huge = tmp_path / "huge.jsonl"
    huge.write_text('{"seq":0,"type":"x","data":{"y":"' + "y" * (8 << 20) + '"}}\n')
    asked: list[int] = []
    opened = _tail.open_log

    class Counting:
        def __init__(self, path: str) -> None:
            self.file = opened(path)

        def __enter__(self) -> Counting:
            return self

        def __exit__(self, *_: object) -> None:
            self.file.close()

        def read(self, size: int = -1) -> bytes:
            asked.append(size)
            return self.file.read(size)

        def __getattr__(self, name: str) -> Any:
            return getattr(self.file, name)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_tail, "open_log", Counting)
        _, head, _ = _tail.read_summary(str(huge))
    assert head is None
    assert asked[0] == 16 << 10


def test_link_of_reads_only_well_formed_links() -> None:
    assert link_of(make_event(LINK_EVENT_TYPE, {"parent": "p", "parentCallId": 3})) == Link("p")
    assert link_of(make_event(LINK_EVENT_TYPE, {"parent": ""})) is None
    assert link_of(make_event(LINK_EVENT_TYPE, [])) is None
    assert link_of(make_event(TURN_START, {"parent": "p"})) is None
    assert link_of(None) is None


def test_new_agent_refuses_a_parent_for_a_session_that_links_asynchronously() -> None:
    class AsyncLinked(MemorySession):
        async def link(self, parent: str, *, parent_call_id: str | None = None) -> object:  # type: ignore[override]
            return MemorySession.link(self, parent, parent_call_id=parent_call_id)

    session = AsyncLinked()
    with pytest.raises(UsageError, match=r"links asynchronously: `await session\.link"):
        new_host().new_agent(session, parent="lead")  # no un-awaited coroutine is left
    assert session.events == []


def test_an_end_records_its_outcome_and_a_short_storable_error() -> None:
    from dsh_tool_todo.core.links import End, end_data, end_of

    assert end_data("finished") == {"outcome": "finished"}
    failed = end_data("failed", "boom\0\udc80" + "x" * 500)
    assert failed["error"].startswith("boom??")
    assert len(failed["error"]) == 200
    failed["error"].encode("utf-8")  # storable: no lone surrogate
    event = {"seq": 4, "type": "session/end", "data": failed}
    assert end_of(event) == End("failed", failed["error"])
    assert end_of({"seq": 4, "type": "session/end", "data": {"outcome": "won"}}) is None
    assert end_of({"seq": 4, "type": "session/link", "data": failed}) is None


@pytest.mark.parametrize(
    ("outcome", "error", "said"),
    [
        ("done", None, r"outcome must be one of finished, failed, not 'done'"),
        ("failed", 5, r"error must be a str or None, not 5"),
    ],
)
def test_a_bad_end_is_refused(outcome: object, error: object, said: str) -> None:
    from dsh_tool_todo.core.links import end_data

    with pytest.raises(UsageError, match=said):
        end_data(outcome, error)
