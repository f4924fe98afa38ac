"""The owner registry: file names, sessions per owner, eviction, serialised calls, one writer."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import dsh_tool_todo
from dsh_tool_todo import todo_write_tool
from dsh_tool_todo.errors import UsageError
from dsh_tool_todo.host import Host
from dsh_tool_todo.stores.jsonl import JsonlSession, current_plan, read_events
from dsh_tool_todo.stores.memory import MemorySession
from dsh_tool_todo.stores.owners import (
    MAX_NAME_BYTES,
    OwnerNameError,
    OwnerRegistry,
    owner_file_name,
    owner_key,
)

from .conftest import options

TOOL = todo_write_tool(allow_parallel_in_progress=False)
NAME = re.compile(r"[a-z0-9_%-][a-z0-9_.%-]*\.jsonl")
ANY_KEY = st.text(st.characters(codec=None, exclude_categories=()), min_size=1, max_size=120)


def plan(content: str, status: str = "pending") -> dict[str, Any]:
    return {"todos": [{"content": content, "status": status}]}


# --- file names ---------------------------------------------------------------------------


@given(ANY_KEY)
def test_every_key_round_trips_through_a_safe_name_or_is_refused_for_length(key: str) -> None:
    try:
        name = owner_file_name(key)
    except OwnerNameError as error:
        size = int(re.search(r"encodes to (\d+) bytes", str(error)).group(1))  # type: ignore[union-attr]
        plain = sum(
            1
            if c in "abcdefghijklmnopqrstuvwxyz0123456789-_."
            else 3 * len(c.encode("utf-8", "surrogatepass"))
            for c in key
        )
        assert MAX_NAME_BYTES < size <= plain + 6  # a leading/trailing dot, a device name
        return
    assert NAME.fullmatch(name), name
    assert len(name.encode()) <= 255
    stem = name.removesuffix(".jsonl")
    assert not stem.endswith(".")
    assert stem.split(".")[0] not in {"con", "prn", "aux", "nul", "com1", "lpt9"}
    assert owner_key(Path(name).stem) == key


@given(ANY_KEY, ANY_KEY)
def test_different_keys_never_share_a_name_even_on_a_case_insensitive_disk(a: str, b: str) -> None:
    try:
        names = owner_file_name(a), owner_file_name(b)
    except OwnerNameError:
        return  # too long: covered above
    assert (names[0].casefold() == names[1].casefold()) == (a == b)


@given(
    st.sampled_from(["a", "A", "b", "B", "%", ".", "é", "É"]).flatmap(
        lambda c: st.lists(st.sampled_from([c, c.swapcase()]), min_size=1, max_size=6)
    )
)
def test_keys_differing_only_in_case_get_names_differing_in_more_than_case(
    chars: list[str],
) -> None:
    key = "".join(chars)
    other = key.swapcase()
    if other != key:
        assert owner_file_name(key).casefold() != owner_file_name(other).casefold()


@pytest.mark.parametrize(
    ("key", "name"),
    [
        ("alice", "alice.jsonl"),
        ("Alice", "%41lice.jsonl"),
        ("a/b", "a%2fb.jsonl"),
        ("a\\b", "a%5cb.jsonl"),
        ("..", "%2e%2e.jsonl"),
        (".", "%2e.jsonl"),
        (".hidden", "%2ehidden.jsonl"),
        ("v1.2", "v1.2.jsonl"),
        ("end.", "end%2e.jsonl"),
        ("a\x00b", "a%00b.jsonl"),
        ("nul", "%6eul.jsonl"),
        ("con.txt", "%63on.txt.jsonl"),
        ("console", "console.jsonl"),
        ("100%", "100%25.jsonl"),
        ("é", "%c3%a9.jsonl"),
        ("\ud800", "%ed%a0%80.jsonl"),
        ("x" * MAX_NAME_BYTES, "x" * MAX_NAME_BYTES + ".jsonl"),
    ],
)
def test_names_of_awkward_keys(key: str, name: str) -> None:
    assert owner_file_name(key) == name
    assert owner_key(name.removesuffix(".jsonl")) == key


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ("", "an owner key must be a non-empty string"),
        ("x" * (MAX_NAME_BYTES + 1), "owner key too long for a file name: it encodes to 250 bytes"),
        ("A" * 84, "encodes to 252 bytes"),
    ],
)
def test_keys_without_a_name_are_refused(key: str, message: str) -> None:
    with pytest.raises(OwnerNameError, match=re.escape(message)):
        owner_file_name(key)


def test_a_key_must_be_a_string() -> None:
    with pytest.raises(OwnerNameError, match="an owner key must be a string, not int"):
        owner_file_name(7)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "stem", ["", "Alice", "%4A", "%61", ".x", "x.", "a%2", "%zz", "%ff", "a/b", "a b", "nul"]
)
def test_names_no_key_encodes_to_are_refused(stem: str) -> None:
    with pytest.raises(OwnerNameError, match="is not an owner file name"):
        owner_key(stem)
    with pytest.raises(ValueError, match="is not an owner file name"):  # also a ValueError
        owner_key(stem)


# --- sessions per owner -------------------------------------------------------------------


def test_one_session_per_owner_in_memory() -> None:
    owners = OwnerRegistry()
    assert owners.call("a", TOOL, plan("A")) == (
        "Updated todo list: 1 pending, 0 in progress, 0 completed."
    )
    owners.call("b", TOOL, plan("B"))
    assert isinstance(owners.session("a"), MemorySession)
    assert owners.session("a") is owners.session("a")
    assert owners.session("a") is not owners.session("b")
    assert owners.session("b").latest(["todo/write"])["data"] == plan("B")  # type: ignore[index]
    assert owners.owners() == ["a", "b"]
    with pytest.raises(UsageError, match="in memory: no path"):
        owners.path("a")


def test_durable_owners_live_in_one_file_each(tmp_path: Path) -> None:
    directory = tmp_path / "new" / "dir"
    with OwnerRegistry(directory) as owners:
        owners.call("Alice/1", TOOL, plan("A"))
        owners.call("..", TOOL, plan("B"))
        assert owners.path("Alice/1") == directory / "%41lice%2f1.jsonl"
    assert sorted(path.name for path in directory.iterdir()) == [
        "%2e%2e.jsonl",
        "%41lice%2f1.jsonl",
    ]
    assert current_plan(directory / "%41lice%2f1.jsonl") == plan("A")["todos"]
    assert {owner_key(path.stem) for path in directory.iterdir()} == {"Alice/1", ".."}


def test_a_bad_key_is_refused_before_anything_is_created(tmp_path: Path) -> None:
    owners = OwnerRegistry(tmp_path / "plans")
    with pytest.raises(OwnerNameError, match="non-empty string"):
        owners.call("", TOOL, plan("A"))
    with pytest.raises(OwnerNameError, match="too long"):
        owners.call("x" * 300, TOOL, plan("A"))
    assert not (tmp_path / "plans").exists()
    assert len(owners) == 0


def test_a_restarted_registry_resumes_each_owners_plan(tmp_path: Path) -> None:
    with OwnerRegistry(tmp_path) as owners:
        owners.call("alice", TOOL, plan("Ship it", "in_progress"))
    host = Host([dsh_tool_todo], options(False))
    agents: dict[str, Any] = {}
    with OwnerRegistry(tmp_path, on_open=lambda key, s: agents.update({key: s})) as owners:
        session = owners.session("alice")
        host.new_agent(session=agents["alice"])
        assert host.projection(session, "todos") == plan("Ship it", "in_progress")["todos"]
        owners.call("alice", TOOL, plan("Ship it", "completed"))
        assert host.projection(session, "todos") == plan("Ship it", "completed")["todos"]
    assert [event["seq"] for event in read_events(tmp_path / "alice.jsonl")] == [0, 1]


# --- eviction -----------------------------------------------------------------------------


def test_the_least_recently_used_idle_owner_is_closed_when_full(tmp_path: Path) -> None:
    opened: list[str] = []
    with OwnerRegistry(tmp_path, max_owners=2, on_open=lambda key, s: opened.append(key)) as owners:
        first = owners.session("a")
        owners.session("b")
        owners.session("a")  # now b is the least recently used
        owners.session("c")
        assert owners.owners() == ["a", "c"]
        assert first.closed is False  # type: ignore[attr-defined]
        evicted = owners.session("d")  # evicts a
        assert first.closed is True  # type: ignore[attr-defined]
        assert "a" not in owners
        assert evicted is owners.session("d")
        owners.call("a", TOOL, plan("again"))  # reopened, on the same file
        assert opened == ["a", "b", "c", "d", "a"]
        assert len(read_events(tmp_path / "a.jsonl")) == 1


def test_an_evicted_durable_session_releases_its_file(tmp_path: Path) -> None:
    with OwnerRegistry(tmp_path, max_owners=1) as owners:
        owners.call("a", TOOL, plan("A"))
        owners.session("b")  # evicts a
        with JsonlSession(tmp_path / "a.jsonl") as other:  # another writer may now take it
            other.append("todo/write", plan("B"))
        owners.call("a", TOOL, plan("C"))
        assert [event["seq"] for event in read_events(tmp_path / "a.jsonl")] == [0, 1, 2]


def test_idle_owners_are_closed_after_idle_seconds() -> None:
    now = [0.0]
    owners = OwnerRegistry(idle_seconds=10, clock=lambda: now[0])
    a = owners.session("a")
    now[0] = 5.0
    owners.session("b")
    now[0] = 12.0
    assert owners.evict_idle() == ["a"]
    assert a.closed is True  # type: ignore[attr-defined]
    now[0] = 16.0
    owners.session("c")  # any use sweeps too
    assert owners.owners() == ["c"]


def test_an_owner_with_a_call_in_progress_is_never_evicted() -> None:
    owners = OwnerRegistry(max_owners=1)
    with owners.locked("a") as session:
        owners.session("b")  # over the limit for now: a is busy
        assert owners.owners() == ["a", "b"]
        assert session.closed is False  # type: ignore[attr-defined]
    owners.session("c")
    assert owners.owners() == ["c"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_owners": 0}, "max_owners must be a positive integer or None, not 0"),
        ({"max_owners": True}, "max_owners must be a positive integer or None, not True"),
        ({"idle_seconds": float("nan")}, "idle_seconds must be a finite number above 0"),
        ({"idle_seconds": 0}, "idle_seconds must be a finite number above 0 or None, not 0"),
    ],
)
def test_bad_limits_are_refused(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(UsageError, match=re.escape(message)):
        OwnerRegistry(**kwargs)


def test_a_closed_registry_closes_every_session_and_refuses_calls(tmp_path: Path) -> None:
    owners = OwnerRegistry(tmp_path)
    sessions = [owners.session(key) for key in ("a", "b")]
    owners.close()
    assert [s.closed for s in sessions] == [True, True]  # type: ignore[attr-defined]
    with pytest.raises(UsageError, match="this owner registry is closed"):
        owners.call("a", TOOL, plan("A"))


def test_a_raising_on_open_leaves_no_session_behind(tmp_path: Path) -> None:
    def refuse(key: str, session: object) -> None:
        raise RuntimeError("host said no")

    owners = OwnerRegistry(tmp_path, on_open=refuse)
    with pytest.raises(RuntimeError, match="host said no"):
        owners.session("a")
    assert len(owners) == 0
    with JsonlSession(tmp_path / "a.jsonl"):  # its file was released
        pass


# --- one caller at a time -----------------------------------------------------------------


def test_threads_calling_for_one_owner_run_one_at_a_time() -> None:
    owners = OwnerRegistry()
    inside = [0]
    most = [0]

    def worker() -> None:
        for _ in range(20):
            with owners.locked("a"):
                inside[0] += 1
                most[0] = max(most[0], inside[0])
                time.sleep(0.0005)
                inside[0] -= 1

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert most[0] == 1


def test_asyncio_callers_for_one_owner_run_in_arrival_order_and_exclude_threads() -> None:
    owners = OwnerRegistry()
    order: list[int] = []
    inside = [0]

    async def caller(index: int) -> None:
        async with owners.alocked("a"):
            inside[0] += 1
            assert inside[0] == 1
            await asyncio.sleep(0.001)
            order.append(index)
            inside[0] -= 1

    def thread_caller() -> None:
        for _ in range(10):
            with owners.locked("a"):
                inside[0] += 1
                assert inside[0] == 1
                time.sleep(0.001)
                inside[0] -= 1

    async def main() -> None:
        thread = threading.Thread(target=thread_caller)
        thread.start()
        await asyncio.gather(*(caller(index) for index in range(30)))
        await asyncio.to_thread(thread.join)

    asyncio.run(main())
    assert order == list(range(30))


def test_acall_records_through_the_async_path() -> None:
    owners = OwnerRegistry()
    text = asyncio.run(owners.acall("a", TOOL, plan("A", "in_progress")))
    assert text == "Updated todo list: 0 pending, 1 in progress, 0 completed."
    assert owners.session("a").latest(["todo/write"])["data"] == plan("A", "in_progress")  # type: ignore[index]


# --- one writer per owner -----------------------------------------------------------------

SECOND_PROCESS = """
import sys
from dsh_tool_todo import todo_write_tool
from dsh_tool_todo.stores.owners import OwnerRegistry
tool = todo_write_tool(allow_parallel_in_progress=False)
OwnerRegistry(sys.argv[1]).call("alice", tool, {"todos": []})
"""


def test_a_second_process_on_the_same_owner_is_refused(tmp_path: Path) -> None:
    with OwnerRegistry(tmp_path) as owners:
        owners.call("alice", TOOL, plan("A"))
        run = subprocess.run(
            [sys.executable, "-c", SECOND_PROCESS, str(tmp_path)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert run.returncode == 1
        assert str(tmp_path / "alice.jsonl") in run.stderr.strip().splitlines()[-1]
    assert len(read_events(tmp_path / "alice.jsonl")) == 1


def test_start_turn_clears_the_plan_for_that_owner_only(tmp_path: Path) -> None:
    with OwnerRegistry(tmp_path) as owners:
        owners.call("a", TOOL, plan("A"))
        owners.call("b", TOOL, plan("B"))
        owners.start_turn("a")
        asyncio.run(owners.astart_turn("a"))
    assert current_plan(tmp_path / "a.jsonl") is None
    assert current_plan(tmp_path / "b.jsonl") == plan("B")["todos"]
    assert [event["type"] for event in read_events(tmp_path / "a.jsonl")] == [
        "todo/write",
        "turn/start",
        "turn/start",
    ]


def test_a_second_registry_in_the_same_process_is_refused_too(tmp_path: Path) -> None:
    with OwnerRegistry(tmp_path) as first, OwnerRegistry(tmp_path) as second:
        first.call("alice", TOOL, plan("A"))
        with pytest.raises(UsageError, match=re.escape(str(tmp_path / "alice.jsonl"))):
            second.call("alice", TOOL, plan("B"))
        assert "alice" not in second
        assert second.call("bob", TOOL, plan("B")).startswith("Updated")
    assert len(read_events(tmp_path / "alice.jsonl")) == 1
