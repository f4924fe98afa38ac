"""An owner registry whose sessions live in PostgreSQL: ``open_session`` makes them."""

from __future__ import annotations

import asyncio
import random
import re
import threading
from collections import Counter

import pytest

import dsh_tool_todo
from dsh_tool_todo import todo_write_tool
from dsh_tool_todo.errors import UsageError
from dsh_tool_todo.host import Host
from dsh_tool_todo.protocols import StoreSession
from dsh_tool_todo.stores import postgres
from dsh_tool_todo.stores.owners import OwnerRegistry
from dsh_tool_todo.stores.postgres import PostgresSession
from tests._builders import plan

TOOL = todo_write_tool(allow_parallel_in_progress=False)
OPTIONS = {"dsh-tool-todo": {"allowParallelInProgress": False}}


def contents(dsn: str, owner: str) -> list[str]:
    events = postgres.read_tail(dsn, owner, limit=10_000)
    assert [event["seq"] for event in events] == list(range(len(events)))
    return [event["data"]["todos"][0]["content"] for event in events]


def test_a_postgres_backed_registry_resumes_each_owners_plan_after_a_restart(pg_dsn: str) -> None:
    with OwnerRegistry(open_session=lambda key: PostgresSession(pg_dsn, key)) as owners:
        assert owners.call("ada", TOOL, plan("Ship it", status="in_progress")) == (
            "Updated todo list: 0 pending, 1 in progress, 0 completed."
        )
        owners.call("bob", TOOL, plan("Review"))
        assert isinstance(owners.session("ada"), PostgresSession)

    host = Host([dsh_tool_todo], OPTIONS)
    with OwnerRegistry(
        open_session=lambda key: PostgresSession(pg_dsn, key),
        on_open=lambda key, session: host.new_agent(session=session),
    ) as restarted:
        session = restarted.session("ada")
        assert host.projection(session, "todos") == plan("Ship it", status="in_progress")["todos"]
        restarted.call("ada", TOOL, plan("Ship it", status="completed"))
        assert host.projection(session, "todos") == plan("Ship it", status="completed")["todos"]
    assert contents(pg_dsn, "ada") == ["Ship it", "Ship it"]
    assert postgres.current_plan(pg_dsn, "bob") == plan("Review")["todos"]


def test_an_evicted_postgres_owner_continues_its_seqs_when_reopened(pg_dsn: str) -> None:
    opened: list[str] = []

    def open_session(key: str) -> StoreSession:
        opened.append(key)
        return PostgresSession(pg_dsn, key)

    with OwnerRegistry(open_session=open_session, max_owners=1) as owners:
        first = owners.session("a")
        owners.call("a", TOOL, plan("A1"))
        owners.call("b", TOOL, plan("B1"))  # evicts a
        assert first.closed is True  # type: ignore[attr-defined]
        owners.call("a", TOOL, plan("A2"))
    assert opened == ["a", "b", "a"]
    assert contents(pg_dsn, "a") == ["A1", "A2"]


def test_keys_postgres_refuses_leave_nothing_behind_and_other_owners_work(pg_dsn: str) -> None:
    owners = OwnerRegistry(open_session=lambda key: PostgresSession(pg_dsn, key))
    with pytest.raises(UsageError, match="a session id must be printable text: 'a\\\\x00b'"):
        owners.call("a\x00b", TOOL, plan("A"))
    with pytest.raises(UsageError, match=re.escape("a session id must have 1 to 200 characters")):
        owners.call("x" * 201, TOOL, plan("A"))
    assert len(owners) == 0
    owners.call("../etc/passwd", TOOL, plan("B"))  # a file name would be hostile; an id is not
    owners.close()
    assert [info.session_id for info in postgres.list_sessions(pg_dsn)] == ["../etc/passwd"]


def test_threads_and_tasks_on_many_postgres_owners_lose_nothing(pg_dsn: str) -> None:
    keys = ["a", "A", "b", "c", "Ä"]
    owners = OwnerRegistry(open_session=lambda key: PostgresSession(pg_dsn, key), max_owners=2)
    acknowledged: list[tuple[str, str]] = []
    failures: list[BaseException] = []

    def thread_worker(name: str) -> None:
        chooser = random.Random(name)
        for index in range(15):
            key, content = chooser.choice(keys), f"{name}-{index}"
            try:
                owners.call(key, TOOL, plan(content))
                acknowledged.append((key, content))
            except BaseException as error:  # checked below
                failures.append(error)

    async def task_worker(name: str) -> None:
        chooser = random.Random(name)
        for index in range(15):
            key, content = chooser.choice(keys), f"{name}-{index}"
            try:
                await owners.acall(key, TOOL, plan(content))
                acknowledged.append((key, content))
            except BaseException as error:  # checked below
                failures.append(error)

    async def tasks() -> None:
        await asyncio.gather(*(task_worker(f"task{n}") for n in range(4)))

    threads = [threading.Thread(target=thread_worker, args=(f"thread{n}",)) for n in range(3)]
    threads.append(threading.Thread(target=lambda: asyncio.run(tasks())))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    owners.close()
    assert failures == []
    assert len(acknowledged) == 7 * 15
    recorded = Counter((key, content) for key in keys for content in contents(pg_dsn, key))
    assert recorded == Counter(acknowledged)
