"""The owner registry when an owner's session goes away or cannot be had: an owner back after
an idle gap, a session its store cannot open, a JSONL log deleted under an open session."""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from psycopg_pool import ConnectionPool

from dsh_tool_todo import todo_write_tool
from dsh_tool_todo.core.contract import EVENT_TYPE
from dsh_tool_todo.errors import (
    InvalidLog,
    LogBusy,
    LogReplaced,
    StoreUnavailable,
    ToolFailure,
    UsageError,
)
from dsh_tool_todo.stores import postgres
from dsh_tool_todo.stores.jsonl import JsonlSession, read_events
from dsh_tool_todo.stores.owners import OwnerRegistry
from dsh_tool_todo.stores.postgres import PostgresSession
from tests._builders import plan

TOOL = todo_write_tool(allow_parallel_in_progress=False)
ONE_PENDING = "Updated todo list: 1 pending, 0 in progress, 0 completed."
WAYS = ["call", "acall", "locked", "alocked"]


def through(way: str, owners: OwnerRegistry, owner: str, args: Any) -> str:
    """One ``todo_write`` call for ``owner`` by each of the registry's ways of holding it."""

    async def held() -> str:
        if way == "acall":
            return await owners.acall(owner, TOOL, args)
        async with owners.alocked(owner) as session:
            return await TOOL.acall(args, session)

    if way == "call":
        return owners.call(owner, TOOL, args)
    if way == "locked":
        with owners.locked(owner) as session:
            return TOOL.call(args, session)
    return asyncio.run(held())


class Store:
    """Where a registry keeps its sessions, and the plans recorded there (``None``: in
    memory, nothing to read back)."""

    def __init__(
        self, options: dict[str, Any], recorded: Callable[[str], list[Any]] | None
    ) -> None:
        self.options = options
        self.recorded = recorded


@pytest.fixture(params=["memory", "directory", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    if request.param == "memory":
        return Store({}, None)
    if request.param == "directory":

        def in_files(owner: str) -> list[Any]:
            return [event["data"]["todos"] for event in read_events(tmp_path / f"{owner}.jsonl")]

        return Store({"directory": tmp_path}, in_files)
    dsn: str = request.getfixturevalue("pg_dsn")

    def in_rows(owner: str) -> list[Any]:
        events = postgres.read_tail(dsn, owner)
        return [event["data"]["todos"] for event in events if event["type"] == EVENT_TYPE]

    return Store({"open_session": lambda owner: PostgresSession(dsn, owner)}, in_rows)


# --- an owner back after an idle gap ------------------------------------------------------


@pytest.mark.parametrize("way", WAYS)
def test_an_owner_back_after_an_idle_gap_is_answered_from_a_reopened_session(
    store: Store, way: str
) -> None:
    now = [0.0]
    with OwnerRegistry(idle_seconds=10, clock=lambda: now[0], **store.options) as owners:
        sessions = []
        for step in range(3):
            assert through(way, owners, "ada", plan(f"step {step}")) == ONE_PENDING
            sessions.append(owners.session("ada"))
            now[0] += 11  # idle longer than idle_seconds before the next call
        assert len({id(session) for session in sessions}) == 3  # each gap: a new session
        assert [getattr(s, "closed", True) for s in sessions[:2]] == [True, True]
    if store.recorded is not None:  # a durable store has every call, in order
        assert store.recorded("ada") == [plan(f"step {step}")["todos"] for step in range(3)]


def test_an_idle_owner_that_does_not_come_back_is_still_closed_by_another_owners_call() -> None:
    now = [0.0]
    with OwnerRegistry(idle_seconds=10, clock=lambda: now[0]) as owners:
        owners.call("ada", TOOL, plan("A"))
        ada = owners.session("ada")
        now[0] = 11
        owners.call("bob", TOOL, plan("B"))
        assert ada.closed is True  # type: ignore[attr-defined]
        assert owners.owners() == ["bob"]


# --- a session its store cannot open ------------------------------------------------------


@pytest.mark.parametrize("way", [*WAYS, "session", "start_turn"])
def test_a_log_another_writer_holds_is_a_tool_failure_and_nothing_is_kept(
    tmp_path: Path, way: str
) -> None:
    with OwnerRegistry(tmp_path) as second:
        with OwnerRegistry(tmp_path) as holder:
            holder.call("ada", TOOL, plan("held"))
            attempts: dict[str, Callable[[], object]] = {
                "session": lambda: second.session("ada"),
                "start_turn": lambda: second.start_turn("ada"),
            }
            attempt = attempts.get(way, lambda: through(way, second, "ada", plan("refused")))
            with pytest.raises(
                ToolFailure,
                match=r"^owner 'ada': its session could not be opened: .*ada\.jsonl: another "
                r"session is writing this log",
            ) as failure:
                attempt()
            assert isinstance(failure.value.__cause__, LogBusy)
            assert "ada" not in second
        assert second.call("ada", TOOL, plan("later")) == ONE_PENDING  # the holder let go
    assert [event["data"]["todos"] for event in read_events(tmp_path / "ada.jsonl")] == [
        plan("held")["todos"],
        plan("later")["todos"],
    ]


@pytest.mark.parametrize("way", WAYS)
def test_a_log_that_is_no_session_log_is_a_tool_failure_saying_what_to_do(
    tmp_path: Path, way: str
) -> None:
    (tmp_path / "ada.jsonl").write_text('{"not": "an event"}\n')
    with OwnerRegistry(tmp_path) as owners:
        with pytest.raises(
            ToolFailure,
            match=r"^owner 'ada': its session could not be opened: .*ada\.jsonl, line 1: not a "
            r"session event .*; nothing was recorded: move the log aside .* or repair it",
        ) as failure:
            through(way, owners, "ada", plan("refused"))
        assert isinstance(failure.value.__cause__, InvalidLog)
        assert "ada" not in owners
        os.replace(tmp_path / "ada.jsonl", tmp_path / "ada.jsonl.bad")  # as the message says
        assert through(way, owners, "ada", plan("after")) == ONE_PENDING


def test_a_directory_that_became_a_file_is_a_tool_failure_naming_it(tmp_path: Path) -> None:
    place = tmp_path / "plans"
    with OwnerRegistry(place) as owners:
        shutil.rmtree(place, ignore_errors=True)
        place.write_text("not a directory\n")
        with pytest.raises(ToolFailure, match=r"^owner 'ada': .*File exists.*plans") as failure:
            owners.call("ada", TOOL, plan("lost"))
        assert isinstance(failure.value.__cause__, OSError)


@pytest.fixture
def unreachable() -> Iterator[ConnectionPool]:
    """A pool on a port nothing listens on, giving up after half a second."""
    with ConnectionPool(
        "postgresql://postgres@127.0.0.1:1/none", min_size=1, timeout=0.5, open=True
    ) as pool:
        yield pool


def test_a_database_out_of_reach_is_a_tool_failure_naming_it(
    unreachable: ConnectionPool,
) -> None:
    with OwnerRegistry(open_session=lambda key: PostgresSession(unreachable, key)) as owners:
        with pytest.raises(ToolFailure, match=r"^owner 'ada': .*127\.0\.0\.1:1/none") as failure:
            asyncio.run(owners.acall("ada", TOOL, plan("lost")))
        assert isinstance(failure.value.__cause__, StoreUnavailable)


def test_a_key_the_store_refuses_is_still_the_callers_usage_error(pg_dsn: str) -> None:
    with OwnerRegistry(open_session=lambda key: PostgresSession(pg_dsn, key)) as owners:
        with pytest.raises(UsageError, match="session id") as refused:
            owners.call("x" * 201, TOOL, plan("A"))
        assert not isinstance(refused.value, ToolFailure)


# --- a JSONL log deleted or replaced under its open session -------------------------------


def logged(path: Path) -> list[Any]:
    return [event["data"]["todos"] for event in read_events(path)]


@pytest.mark.parametrize("way", WAYS)
def test_a_log_deleted_under_its_session_fails_that_call_and_the_next_opens_a_fresh_log(
    tmp_path: Path, way: str
) -> None:
    place = tmp_path / "plans"
    with OwnerRegistry(place) as owners:
        assert through(way, owners, "ada", plan("before")) == ONE_PENDING
        shutil.rmtree(place)
        with pytest.raises(ToolFailure, match=r"ada\.jsonl: the log was deleted or moved") as lost:
            through(way, owners, "ada", plan("lost"))
        assert isinstance(lost.value.__cause__, LogReplaced)
        assert not place.exists()  # acknowledged nowhere, and nothing made again yet
        assert through(way, owners, "ada", plan("after")) == ONE_PENDING
    assert logged(place / "ada.jsonl") == [plan("after")["todos"]]


def test_a_log_replaced_under_its_session_is_left_to_its_new_writer(tmp_path: Path) -> None:
    with OwnerRegistry(tmp_path) as owners:
        owners.call("ada", TOOL, plan("before"))
        (tmp_path / "new.jsonl").write_bytes(b"")
        os.replace(tmp_path / "new.jsonl", tmp_path / "ada.jsonl")
        with JsonlSession(tmp_path / "ada.jsonl") as other:  # the new file's own writer
            other.append(EVENT_TYPE, plan("theirs"))
            with pytest.raises(ToolFailure, match="the log was replaced by another file"):
                owners.call("ada", TOOL, plan("lost"))
            with pytest.raises(ToolFailure, match="another session is writing this log"):
                owners.call("ada", TOOL, plan("refused"))  # reopened: the other one holds it
        assert owners.call("ada", TOOL, plan("after")) == ONE_PENDING
    assert logged(tmp_path / "ada.jsonl") == [plan("theirs")["todos"], plan("after")["todos"]]
