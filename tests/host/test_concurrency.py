"""Many writers on one session: every event a whole snapshot, none lost, the view the last."""

from __future__ import annotations

import asyncio
import itertools
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dsh_tool_todo import replay
from dsh_tool_todo.core import contract
from dsh_tool_todo.host import AsyncMemorySession, Host, HostAgent
from dsh_tool_todo.stores.jsonl import JsonlSession, current_plan, read_events
from tests._builders import todo, todos
from tests.conftest import HostFactory

WRITERS, CALLS = 8, 1000


@pytest.fixture(autouse=True)
def frequent_thread_switches() -> Iterator[None]:
    """Switch threads far more often than the default 5 ms, so calls really interleave."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(interval)


def writer_plan(writer: int, call: int) -> list[dict[str, str]]:
    """A plan only this writer's this call sends; its first item names both."""
    size = 1 + (writer + call) % 6
    return [
        todo(f"w{writer} c{call} step {step}", "in_progress" if step == 0 else "pending")
        for step in range(size)
    ]


def author(items: list[dict[str, str]]) -> tuple[int, int]:
    writer, call, *_ = items[0]["content"].split()
    return int(writer[1:]), int(call[1:])


def run_threads(host: Host, agents: list[HostAgent]) -> None:
    """``WRITERS`` threads, each making ``CALLS`` calls, round-robin over ``agents``."""
    start = threading.Barrier(WRITERS)
    failures: list[str] = []

    def make_calls(writer: int) -> None:
        start.wait()
        for call in range(CALLS):
            agent = agents[(writer + call) % len(agents)]
            text = host.call_tool("todo_write", todos(*writer_plan(writer, call)), agent=agent)
            if not text.startswith("Updated todo list"):
                failures.append(text)

    threads = [threading.Thread(target=make_calls, args=(writer,)) for writer in range(WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads)
    assert failures == []


def check_log(events: list[dict[str, Any]], expected_calls: int) -> None:
    """Whole snapshots, each sent exactly once, each writer's in the order it sent them."""
    assert len(events) == expected_calls
    last_call = dict.fromkeys(range(WRITERS), -1)
    seen: set[tuple[int, int]] = set()
    for event in events:
        assert event["type"] == contract.EVENT_TYPE
        assert set(event["data"]) == {"todos"}
        items = event["data"]["todos"]
        writer, call = author(items)
        assert items == writer_plan(writer, call)  # whole: no item lost, added or mixed in
        assert (writer, call) not in seen
        seen.add((writer, call))
        assert call > last_call[writer]
        last_call[writer] = call
    writers = [author(event["data"]["todos"])[0] for event in events]
    switches = sum(first != second for first, second in itertools.pairwise(writers))
    assert switches >= WRITERS  # the writers really interleaved
    assert replay(events, verify=True) == events[-1]["data"]["todos"]


def test_threads_on_one_memory_session(host: Host, agent: HostAgent) -> None:
    heard: list[dict[str, Any]] = []
    agent.session.subscribe(heard.append)
    run_threads(host, [agent])
    events = agent.session.events
    check_log(events, WRITERS * CALLS)
    assert heard == events  # listeners hear the events in log order
    assert host.projection(agent.session, "todos") == events[-1]["data"]["todos"]


def test_threads_on_one_jsonl_session(host: Host, tmp_path: Path) -> None:
    path = tmp_path / "session.jsonl"
    heard: list[dict[str, Any]] = []
    with JsonlSession(path) as session:
        agent = host.new_agent(session=session)
        session.subscribe(heard.append)
        run_threads(host, [agent])
        view = host.projection(session, "todos")
    events = read_events(path)
    assert [event["seq"] for event in events] == list(range(WRITERS * CALLS))
    assert heard == events  # listeners hear the events in log order
    check_log(events, WRITERS * CALLS)
    assert view == events[-1]["data"]["todos"] == current_plan(path)


def test_two_agents_never_see_each_others_events(host: Host, tmp_path: Path) -> None:
    path = tmp_path / "second.jsonl"
    with JsonlSession(path) as on_disk:
        agents = [host.new_agent(), host.new_agent(session=on_disk)]
        run_threads(host, agents)
        views = [host.projection(agent.session, "todos") for agent in agents]
    logs = [agents[0].session.events, read_events(path)]
    for index, events in enumerate(logs):
        # writer w's call c went to agent (w + c) % 2
        assert all(sum(author(e["data"]["todos"])) % 2 == index for e in events)
        assert len(events) == WRITERS * CALLS // 2
        assert views[index] == events[-1]["data"]["todos"]
    assert views[0] != views[1]


class YieldingSession(AsyncMemorySession):
    """An async session that lets other tasks run between a call's check and its append."""

    async def append(self, type: str, data: Any, /) -> dict[str, Any]:  # type: ignore[override]
        await asyncio.sleep(0)
        return await super().append(type, data)


@pytest.mark.parametrize("session_type", [AsyncMemorySession, YieldingSession])
def test_tasks_on_one_async_session(
    make_host: HostFactory, session_type: type[AsyncMemorySession]
) -> None:
    host = make_host()
    agent = host.new_agent(session=session_type())

    async def make_calls(writer: int) -> None:
        for call in range(CALLS):
            args = todos(*writer_plan(writer, call))
            text = await host.acall_tool("todo_write", args, agent=agent)
            assert text.startswith("Updated todo list"), text
            await asyncio.sleep(0)  # let the other writers in between calls too

    async def main() -> None:
        await asyncio.gather(*(make_calls(writer) for writer in range(WRITERS)))

    asyncio.run(main())
    events = agent.session.events
    check_log(events, WRITERS * CALLS)
    writers_in_first_hundred = {author(e["data"]["todos"])[0] for e in events[:100]}
    assert len(writers_in_first_hundred) == WRITERS  # the tasks really interleaved
    assert host.projection(agent.session, "todos") == events[-1]["data"]["todos"]
