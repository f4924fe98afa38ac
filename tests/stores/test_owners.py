"""The owner registry: file names, sessions per owner, eviction, serialised calls, one writer."""

from __future__ import annotations

import asyncio
import random
import re
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import dsh_tool_todo
from dsh_tool_todo import todo_write_tool
from dsh_tool_todo.core.contract import EVENT_TYPE
from dsh_tool_todo.errors import OwnerNameError, ToolFailure, UsageError
from dsh_tool_todo.host import Host
from dsh_tool_todo.protocols import StoreSession
from dsh_tool_todo.stores._owner_names import MAX_NAME_BYTES
from dsh_tool_todo.stores.jsonl import JsonlSession, current_plan, read_events
from dsh_tool_todo.stores.memory import MemorySession
from dsh_tool_todo.stores.owners import OwnerRegistry, owner_file_name, owner_key
from tests._builders import plan
from tests.conftest import options

TOOL = todo_write_tool(allow_parallel_in_progress=False)
NAME = re.compile(r"[a-z0-9_%-][a-z0-9_.%-]*\.jsonl")
ANY_KEY = st.text(st.characters(codec=None, exclude_categories=()), min_size=1, max_size=120)


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
    assert owners.session("b").latest([EVENT_TYPE])["data"] == plan("B")  # type: ignore[index]
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
        owners.call("alice", TOOL, plan("Ship it", status="in_progress"))
    host = Host([dsh_tool_todo], options(False))
    agents: dict[str, Any] = {}
    with OwnerRegistry(tmp_path, on_open=lambda key, s: agents.update({key: s})) as owners:
        session = owners.session("alice")
        host.new_agent(session=agents["alice"])
        assert host.projection(session, "todos") == plan("Ship it", status="in_progress")["todos"]
        owners.call("alice", TOOL, plan("Ship it", status="completed"))
        assert host.projection(session, "todos") == plan("Ship it", status="completed")["todos"]
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
            other.append(EVENT_TYPE, plan("B"))
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
    text = asyncio.run(owners.acall("a", TOOL, plan("A", status="in_progress")))
    assert text == "Updated todo list: 0 pending, 1 in progress, 0 completed."
    assert owners.session("a").latest([EVENT_TYPE])["data"] == plan("A", status="in_progress")  # type: ignore[index]


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
        EVENT_TYPE,
        "turn/start",
        "turn/start",
    ]


def test_a_second_registry_in_the_same_process_is_refused_too(tmp_path: Path) -> None:
    with OwnerRegistry(tmp_path) as first, OwnerRegistry(tmp_path) as second:
        first.call("alice", TOOL, plan("A"))
        # the store's refusal, not the caller's mistake: not recorded, and a later call may do
        with pytest.raises(
            ToolFailure,
            match=re.escape(f"{tmp_path / 'alice.jsonl'}: another session is writing this log"),
        ):
            second.call("alice", TOOL, plan("B"))
        assert "alice" not in second
        assert second.call("bob", TOOL, plan("B")).startswith("Updated")
    assert len(read_events(tmp_path / "alice.jsonl")) == 1


# --- hostile use: closing, opening, cancelling, racing --------------------------------------


def finishes_within(seconds: float, work: Callable[[], Any]) -> Any:
    """``work()`` in a daemon thread: a deadlock fails the test instead of hanging the suite."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = work()
        except BaseException as error:  # handed back to the test below
            outcome["error"] = error

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still running after {seconds}s: deadlocked"
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


def test_close_on_the_loop_while_a_task_holds_an_owner_returns_and_closes_it_after() -> None:
    owners = OwnerRegistry()

    async def main() -> tuple[bool, bool, list[str]]:
        held: list[Any] = []
        done = asyncio.Event()

        async def hold() -> None:
            async with owners.alocked("a") as session:
                held.append(session)
                await done.wait()
                session.append("host/note", {})

        task = asyncio.create_task(hold())
        idle = owners.session("b")
        while not held:
            await asyncio.sleep(0)
        owners.close()  # on the loop, with the task suspended inside alocked
        busy_closed_at_once = held[0].closed
        done.set()
        await task
        assert held[0].closed is True
        return busy_closed_at_once, idle.closed, [e["type"] for e in held[0].events]

    busy_closed, idle_closed, types = finishes_within(10, lambda: asyncio.run(main()))
    assert (busy_closed, idle_closed) == (False, True)  # the idle one at once, the busy one after
    assert types == ["host/note"]  # the call in progress finished
    assert len(owners) == 0
    with pytest.raises(UsageError, match="this owner registry is closed"):
        owners.call("a", TOOL, plan("A"))


def test_a_session_busy_at_close_is_closed_when_its_call_ends(tmp_path: Path) -> None:
    owners = OwnerRegistry(tmp_path)
    with owners.locked("a") as session:
        finishes_within(10, owners.close)  # from another thread: returns at once too
        assert session.closed is False  # type: ignore[attr-defined]
        session.append("host/note", {})
    assert session.closed is True  # type: ignore[attr-defined]
    with JsonlSession(tmp_path / "a.jsonl"):  # its file is released
        pass
    assert [event["type"] for event in read_events(tmp_path / "a.jsonl")] == ["host/note"]


def test_aclose_waits_for_calls_in_progress_and_async_with_closes() -> None:
    async def main() -> list[str]:
        log: list[str] = []
        async with OwnerRegistry() as owners:
            entered = asyncio.Event()

            async def hold() -> None:
                async with owners.alocked("a"):
                    entered.set()
                    await asyncio.sleep(0.05)
                    log.append("call ended")

            task = asyncio.create_task(hold())
            await entered.wait()
            await owners.aclose()
            log.append("aclose returned")
            await task
            assert len(owners) == 0
        return log

    assert finishes_within(10, lambda: asyncio.run(main())) == ["call ended", "aclose returned"]


Gate = tuple[Callable[[str, StoreSession], None], threading.Event, threading.Event, list[Any]]


def opening_gate() -> Gate:
    """An ``on_open`` that says it is ``inside``, waits until ``proceed`` is set, then
    attaches a listener (as a host resumes its projections, then follows the log)."""
    inside = threading.Event()
    proceed = threading.Event()
    seen: list[Any] = []

    def on_open(key: str, session: StoreSession) -> None:
        inside.set()
        assert proceed.wait(10)
        session.subscribe(lambda event: seen.append(event["data"]["todos"][0]["content"]))

    return on_open, inside, proceed, seen


def test_no_thread_call_runs_before_on_open_has_returned() -> None:
    on_open, inside, proceed, seen = opening_gate()
    owners = OwnerRegistry(on_open=on_open)
    first = threading.Thread(target=owners.call, args=("a", TOOL, plan("first")))
    second = threading.Thread(target=owners.call, args=("a", TOOL, plan("second")))
    first.start()
    assert inside.wait(10)  # first is inside on_open
    second.start()
    time.sleep(0.2)  # second waits: it must not run on a session on_open has not finished
    proceed.set()
    first.join(10)
    second.join(10)
    assert seen == ["first", "second"]


def test_no_asyncio_call_runs_before_on_open_has_returned_and_the_loop_keeps_running() -> None:
    on_open, inside, proceed, seen = opening_gate()
    owners = OwnerRegistry(on_open=on_open)

    async def main() -> int:
        ticks = 0
        call = asyncio.create_task(owners.acall("a", TOOL, plan("second")))
        while not proceed.is_set():
            await asyncio.sleep(0.01)
            ticks += 1
            if ticks == 20:
                proceed.set()
        await call
        return ticks

    first = threading.Thread(target=owners.call, args=("a", TOOL, plan("first")))
    first.start()
    assert inside.wait(10)  # first is inside on_open
    assert finishes_within(10, lambda: asyncio.run(main())) == 20  # the loop was never blocked
    first.join(10)
    assert seen == ["first", "second"]


def test_a_failed_open_is_removed_before_waiters_wake_and_they_open_afresh(
    tmp_path: Path,
) -> None:
    inside = threading.Event()
    proceed = threading.Event()
    opened: list[StoreSession] = []
    seen: list[Any] = []

    def on_open(key: str, session: StoreSession) -> None:
        opened.append(session)
        if len(opened) == 1:
            inside.set()
            assert proceed.wait(10)
            raise RuntimeError("host said no")
        session.subscribe(seen.append)

    owners = OwnerRegistry(tmp_path, on_open=on_open)
    errors: list[BaseException] = []

    def first() -> None:
        try:
            owners.call("a", TOOL, plan("first"))
        except RuntimeError as error:
            errors.append(error)

    thread = threading.Thread(target=first)
    thread.start()
    assert inside.wait(10)  # first is inside on_open
    waiter = threading.Thread(target=owners.call, args=("a", TOOL, plan("second")))
    waiter.start()
    time.sleep(0.1)
    proceed.set()
    thread.join(10)
    waiter.join(10)
    assert [str(error) for error in errors] == ["host said no"]
    assert len(opened) == 2
    assert opened[0] is not opened[1]
    assert opened[0].closed is True  # type: ignore[attr-defined]
    assert [event["data"] for event in seen] == [plan("second")]
    assert owners.session("a") is opened[1]
    owners.close()
    assert [event["data"] for event in read_events(tmp_path / "a.jsonl")] == [plan("second")]


# --- open_session: sessions from any store -------------------------------------------------


def test_open_session_makes_each_owners_session(tmp_path: Path) -> None:
    made: list[str] = []

    def open_session(key: str) -> StoreSession:
        made.append(key)
        return JsonlSession(tmp_path / f"tenant-7-{owner_file_name(key)}")

    with OwnerRegistry(open_session=open_session, max_owners=1) as owners:
        owners.call("Ada", TOOL, plan("A"))
        owners.call("bob", TOOL, plan("B"))  # evicts Ada
        owners.call("Ada", TOOL, plan("C"))  # reopened through the factory
        with pytest.raises(UsageError, match="sessions come from open_session: no path"):
            owners.path("Ada")
    assert made == ["Ada", "bob", "Ada"]
    assert [e["data"] for e in read_events(tmp_path / "tenant-7-%41da.jsonl")] == [
        plan("A"),
        plan("C"),
    ]


def test_open_session_and_directory_together_are_refused(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="give a directory or open_session, not both"):
        OwnerRegistry(tmp_path, open_session=lambda key: MemorySession())


def test_an_open_session_returning_no_session_is_refused() -> None:
    owners = OwnerRegistry(open_session=lambda key: None)  # type: ignore[arg-type,return-value]
    with pytest.raises(
        UsageError,
        match=re.escape(
            "open_session returned NoneType for owner 'a', not a session "
            "(append, subscribe, latest and close)"
        ),
    ):
        owners.call("a", TOOL, plan("A"))
    assert len(owners) == 0


class _NoLatest(MemorySession):
    latest = None  # type: ignore[assignment]  # one of the four methods, unset


class _Duck:
    """A session by its four methods alone, no store class of this library."""

    def __init__(self) -> None:
        self.inner = MemorySession()
        self.append, self.subscribe = self.inner.append, self.inner.subscribe
        self.latest, self.close = self.inner.latest, self.inner.close


def test_a_session_is_known_by_its_four_methods_as_the_protocol_knows_it() -> None:
    refused = OwnerRegistry(open_session=lambda key: _NoLatest())
    with pytest.raises(UsageError, match=r"open_session returned _NoLatest for owner 'a'"):
        refused.call("a", TOOL, plan("A"))
    assert len(refused) == 0
    duck = _Duck()
    owners = OwnerRegistry(open_session=lambda key: duck)  # type: ignore[arg-type,return-value]
    assert owners.call("a", TOOL, plan("A")).startswith("Updated")
    assert [event["data"]["todos"] for event in duck.inner.events] == [plan("A")["todos"]]


def test_session_in_another_thread_waits_for_the_opening_and_gets_its_session() -> None:
    on_open, inside, proceed, _seen = opening_gate()
    owners = OwnerRegistry(on_open=on_open)
    opener = threading.Thread(target=owners.call, args=("a", TOOL, plan("first")))
    got: list[StoreSession] = []
    waiter = threading.Thread(target=lambda: got.append(owners.session("a")))
    opener.start()
    assert inside.wait(10)
    waiter.start()
    time.sleep(0.2)
    assert got == []  # waiting while on_open runs
    proceed.set()
    opener.join(10)
    waiter.join(10)
    assert got == [owners.session("a")]


def test_an_open_session_that_raises_leaves_nothing_behind() -> None:
    def refuse(key: str) -> StoreSession:
        raise ConnectionError(f"no store for {key}")

    owners = OwnerRegistry(open_session=refuse)
    # a store out of reach: the call is not recorded (ToolFailure), the store's error its cause
    with pytest.raises(ToolFailure, match=r"^owner 'a': .* opened: no store for a$") as failure:
        owners.call("a", TOOL, plan("A"))
    assert isinstance(failure.value.__cause__, ConnectionError)
    assert len(owners) == 0


# --- one caller at a time, whatever the caller -----------------------------------------------


async def hold_in_turns(owners: OwnerRegistry, inside: list[int], count: int) -> None:
    async def one() -> None:
        async with owners.alocked("a"):
            inside[0] += 1
            assert inside[0] == 1
            await asyncio.sleep(0.002)
            inside[0] -= 1

    await asyncio.gather(*(one() for _ in range(count)))


def test_one_owner_serves_one_event_loop_after_another() -> None:
    owners = OwnerRegistry()
    inside = [0]
    asyncio.run(hold_in_turns(owners, inside, 3))
    asyncio.run(hold_in_turns(owners, inside, 3))  # a new loop: the owner's lock still serves


def test_one_owner_serves_event_loops_in_several_threads_one_at_a_time() -> None:
    owners = OwnerRegistry()
    inside = [0]
    errors: list[BaseException] = []

    def run() -> None:
        try:
            asyncio.run(hold_in_turns(owners, inside, 10))
        except BaseException as error:  # checked below
            errors.append(error)

    def all_loops() -> None:
        threads = [threading.Thread(target=run) for _ in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    finishes_within(20, all_loops)
    assert errors == []


def test_a_blocking_call_on_the_loop_while_a_task_holds_the_owner_is_refused() -> None:
    owners = OwnerRegistry()

    async def main() -> None:
        held = asyncio.Event()

        async def hold() -> None:
            async with owners.alocked("a"):
                held.set()
                await asyncio.sleep(0.05)

        task = asyncio.create_task(hold())
        await held.wait()
        with pytest.raises(UsageError, match="would never return: use acall or alocked"):
            owners.call("a", TOOL, plan("A"))  # would block the loop the holder needs
        await task
        assert owners.call("a", TOOL, plan("A")).startswith("Updated")  # free again

    finishes_within(10, lambda: asyncio.run(main()))


def test_a_nested_blocking_call_for_the_same_owner_is_refused() -> None:
    owners = OwnerRegistry()

    def nested() -> None:
        with owners.locked("a"), pytest.raises(UsageError, match="owner 'a' is held"):
            owners.call("a", TOOL, plan("A"))
        with owners.locked("a"), owners.locked("b"):  # other owners are fine
            pass

    finishes_within(10, nested)


def test_a_task_nesting_calls_for_one_owner_is_refused_and_aclose_inside_a_call_too() -> None:
    owners = OwnerRegistry()

    async def main() -> None:
        async with owners.alocked("a"):
            with pytest.raises(UsageError, match="owner 'a' is held by this task already"):
                await owners.acall("a", TOOL, plan("A"))
            with pytest.raises(UsageError, match=r"aclose\(\) inside a call for owner 'a'"):
                await owners.aclose()
            assert await owners.acall("b", TOOL, plan("B"))  # other owners are fine
        assert await owners.acall("a", TOOL, plan("A"))  # nothing was left held or closed

    finishes_within(10, lambda: asyncio.run(main()))


def test_on_open_asking_the_registry_for_its_own_owner_is_refused() -> None:
    def on_open(key: str, session: StoreSession) -> None:
        owners.session(key)

    owners = OwnerRegistry(on_open=on_open)
    with pytest.raises(UsageError, match="on_open is still running for owner 'a'"):
        finishes_within(10, lambda: owners.session("a"))
    assert len(owners) == 0


def test_on_open_calling_for_its_own_owner_is_refused() -> None:
    def on_open(key: str, session: StoreSession) -> None:
        owners.call(key, TOOL, plan("from on_open"))

    owners = OwnerRegistry(on_open=on_open)
    with pytest.raises(UsageError, match="owner 'a' is held or awaited by this thread already"):
        finishes_within(10, lambda: owners.call("a", TOOL, plan("A")))
    assert len(owners) == 0


def test_a_task_cancelled_while_waiting_for_an_owner_leaves_it_free() -> None:
    owners = OwnerRegistry()

    async def main() -> None:
        with owners.locked("a"):  # held: the tasks below queue
            waiting = [asyncio.create_task(owners.acall("a", TOOL, plan("A"))) for _ in range(3)]
            await asyncio.sleep(0.01)
            waiting[1].cancel()  # cancelled while queued
        waiting[0].cancel()  # cancelled just as it was handed the lock
        results = await asyncio.gather(*waiting, return_exceptions=True)
        assert [type(result) for result in results] == [
            asyncio.CancelledError,
            asyncio.CancelledError,
            str,
        ]
        assert await asyncio.wait_for(owners.acall("a", TOOL, plan("B")), 5)

    finishes_within(10, lambda: asyncio.run(main()))
    assert [e["data"] for e in owners.session("a").events] == [plan("A"), plan("B")]  # type: ignore[attr-defined]


def test_a_task_cancelled_by_a_timeout_while_a_thread_holds_the_owner_leaves_it_free() -> None:
    owners = OwnerRegistry()
    release = threading.Event()

    def hold() -> None:
        with owners.locked("a"):
            release.wait(10)

    async def main() -> None:
        thread = threading.Thread(target=hold)
        thread.start()
        await asyncio.sleep(0.05)
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(owners.acall("a", TOOL, plan("A")), 0.05)
        release.set()
        await asyncio.to_thread(thread.join)
        assert await asyncio.wait_for(owners.acall("a", TOOL, plan("B")), 5)

    finishes_within(10, lambda: asyncio.run(main()))
    assert [e["data"] for e in owners.session("a").events] == [plan("B")]  # type: ignore[attr-defined]


# --- many callers, hostile keys, failing sessions: nothing acknowledged is lost ---------------

HOSTILE_KEYS = ["a", "A", "../etc/passwd", "a\x00b", "\ud800x", "nul", "É" * 40, ".", "x" * 249]


def closed_registry(error: BaseException) -> bool:
    return isinstance(error, UsageError) and "registry is closed" in str(error)


def hammer(
    owners: OwnerRegistry,
    keys: list[str],
    calls: int,
    expected: Callable[[BaseException], bool] = closed_registry,
) -> list[tuple[str, str]]:
    """Threads and asyncio tasks writing to ``keys`` at random; the calls acknowledged.

    A call may fail only with an ``expected`` error."""
    acknowledged: list[tuple[str, str]] = []
    failures: list[BaseException] = []

    def record(key: str, content: str, text: str) -> None:
        assert text.startswith("Updated todo list"), text
        acknowledged.append((key, content))

    def refused(error: BaseException) -> None:
        if not expected(error):
            failures.append(error)

    def thread_worker(name: str) -> None:
        chooser = random.Random(name)
        for index in range(calls):
            key, content = chooser.choice(keys), f"{name}-{index}"
            try:
                record(key, content, owners.call(key, TOOL, plan(content)))
            except BaseException as error:
                refused(error)

    async def task_worker(name: str) -> None:
        chooser = random.Random(name)
        for index in range(calls):
            key, content = chooser.choice(keys), f"{name}-{index}"
            try:
                record(key, content, await owners.acall(key, TOOL, plan(content)))
            except BaseException as error:
                refused(error)
            await asyncio.sleep(0)

    async def tasks() -> None:
        await asyncio.gather(*(task_worker(f"task{n}") for n in range(8)))

    threads = [threading.Thread(target=thread_worker, args=(f"thread{n}",)) for n in range(4)]
    threads.append(threading.Thread(target=lambda: asyncio.run(tasks())))

    def run_all() -> None:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    finishes_within(120, run_all)
    assert failures == []
    return acknowledged


def recorded_by_owner(directory: Path, keys: list[str]) -> dict[str, list[str]]:
    recorded: dict[str, list[str]] = {}
    for key in keys:
        path = directory / owner_file_name(key)
        events = read_events(path) if path.exists() else []
        assert [event["seq"] for event in events] == list(range(len(events)))
        recorded[key] = [event["data"]["todos"][0]["content"] for event in events]
    return recorded


def by_owner(acknowledged: list[tuple[str, str]], keys: list[str]) -> dict[str, list[str]]:
    return {key: sorted(content for owner, content in acknowledged if owner == key) for key in keys}


def test_threads_and_tasks_on_hostile_keys_with_eviction_lose_nothing(tmp_path: Path) -> None:
    owners = OwnerRegistry(tmp_path, max_owners=2)
    acknowledged = hammer(owners, HOSTILE_KEYS, 25)
    owners.close()
    assert len(acknowledged) == 12 * 25
    recorded = recorded_by_owner(tmp_path, HOSTILE_KEYS)
    assert {key: sorted(contents) for key, contents in recorded.items()} == by_owner(
        acknowledged, HOSTILE_KEYS
    )
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted(
        owner_file_name(key) for key in HOSTILE_KEYS if recorded[key]
    )


def test_close_racing_calls_and_opens_loses_nothing_acknowledged(tmp_path: Path) -> None:
    opens = [0]

    def close_at_the_thirtieth_open(key: str, session: StoreSession) -> None:
        opens[0] += 1
        if opens[0] >= 30:  # 12 callers: at least 18 calls have ended by now
            owners.close()

    owners = OwnerRegistry(tmp_path, max_owners=3, on_open=close_at_the_thirtieth_open)
    acknowledged = hammer(owners, HOSTILE_KEYS, 200)
    assert 18 <= len(acknowledged) < 12 * 200  # the close landed mid-run
    assert len(owners) == 0  # every session closed once its calls ended
    for key in HOSTILE_KEYS:  # and every file released
        JsonlSession(tmp_path / owner_file_name(key)).close()
    recorded = recorded_by_owner(tmp_path, HOSTILE_KEYS)
    assert {key: sorted(contents) for key, contents in recorded.items()} == by_owner(
        acknowledged, HOSTILE_KEYS
    )


def test_on_open_failing_at_random_under_load_loses_nothing_and_holds_no_file(
    tmp_path: Path,
) -> None:
    chooser = random.Random(7)
    refusals = [0]

    def on_open(key: str, session: StoreSession) -> None:
        if chooser.random() < 0.3:
            refusals[0] += 1
            raise RuntimeError("host said no")

    owners = OwnerRegistry(tmp_path, max_owners=2, on_open=on_open)
    acknowledged = hammer(owners, HOSTILE_KEYS, 25, lambda error: str(error) == "host said no")
    owners.close()
    assert refusals[0] > 10
    assert len(acknowledged) >= 12 * 25 - refusals[0]
    recorded = recorded_by_owner(tmp_path, HOSTILE_KEYS)  # a leaked session would hold its file:
    for key in HOSTILE_KEYS:
        JsonlSession(tmp_path / owner_file_name(key)).close()  # refused with LogBusy here
    assert {key: sorted(contents) for key, contents in recorded.items()} == by_owner(
        acknowledged, HOSTILE_KEYS
    )


def test_tasks_cancelled_at_random_while_waiting_leave_every_owner_free() -> None:
    owners = OwnerRegistry()
    acknowledged: list[str] = []

    async def caller(index: int) -> None:
        try:
            await asyncio.wait_for(owners.acall("a", TOOL, plan(str(index))), 0.0005 * index)
            acknowledged.append(str(index))
        except asyncio.TimeoutError:
            pass

    holding = threading.Event()

    def blocker() -> None:
        for _ in range(50):
            with owners.locked("a"):
                holding.set()
                time.sleep(0.001)

    async def main() -> None:
        thread = threading.Thread(target=blocker)
        thread.start()
        await asyncio.to_thread(holding.wait, 10)  # the first caller's 0.5 ms cannot be enough
        await asyncio.gather(*(caller(index) for index in range(1, 200)))
        await asyncio.to_thread(thread.join)
        assert await asyncio.wait_for(owners.acall("a", TOOL, plan("last")), 5)

    finishes_within(60, lambda: asyncio.run(main()))
    events = owners.session("a").events  # type: ignore[attr-defined]
    recorded = [e["data"]["todos"][0]["content"] for e in events]
    assert sorted(recorded) == sorted([*acknowledged, "last"])
    assert len(acknowledged) < 199  # some were cancelled


class FlakySession(MemorySession):
    """Every third append fails before recording; closing may fail too."""

    def __init__(self, *, close_fails: bool = False) -> None:
        super().__init__()
        self.attempts = 0
        self.close_fails = close_fails

    def append(self, type: str, data: Any, /) -> dict[str, Any]:
        self.attempts += 1
        if self.attempts % 3 == 0:
            raise OSError("disk full")
        return super().append(type, data)

    def close(self) -> None:
        super().close()
        if self.close_fails:
            raise OSError("close failed")


def test_a_session_whose_append_raises_frees_its_owner_and_keeps_what_it_recorded() -> None:
    sessions: dict[str, FlakySession] = {}

    def open_session(key: str) -> StoreSession:
        return sessions.setdefault(key, FlakySession())

    owners = OwnerRegistry(open_session=open_session)
    outcomes: list[str] = []
    failures: list[str] = []

    def worker(index: int) -> None:
        for step in range(30):
            content = f"{index}-{step}"
            try:
                owners.call("a", TOOL, plan(content))
                outcomes.append(content)
            except ToolFailure as error:
                failures.append(str(error))

    threads = [threading.Thread(target=worker, args=(index,)) for index in range(4)]

    def run_all() -> None:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    finishes_within(60, run_all)
    recorded = [event["data"]["todos"][0]["content"] for event in sessions["a"].events]
    assert sorted(recorded) == sorted(outcomes)
    assert len(outcomes) == 80  # two of every three
    assert set(failures) == {"todo/write could not be appended: disk full"}


def test_a_session_whose_close_raises_fails_no_other_owners_call(
    caplog: pytest.LogCaptureFixture,
) -> None:
    owners = OwnerRegistry(open_session=lambda key: FlakySession(close_fails=True), max_owners=1)
    owners.call("a", TOOL, plan("A"))
    with caplog.at_level("ERROR", logger="dsh_tool_todo"):
        assert owners.call("b", TOOL, plan("B")).startswith("Updated")  # evicts a
    assert owners.owners() == ["b"]
    (record,) = caplog.records
    assert "closing owner 'a'" in record.getMessage()
    assert "close failed" in str(record.exc_info[1])  # type: ignore[index]


WRITER_PROCESS = """
import sys
from dsh_tool_todo import todo_write_tool
from dsh_tool_todo.stores.owners import OwnerRegistry
tool = todo_write_tool(allow_parallel_in_progress=False)
owners = OwnerRegistry(sys.argv[1], max_owners=1)
for index in range(100_000):
    owner = "ab"[index % 2]
    owners.call(owner, tool, {"todos": [{"content": str(index), "status": "pending"}]})
    print(owner, index, flush=True)
"""


def test_a_writer_killed_mid_run_keeps_every_acknowledged_call(tmp_path: Path) -> None:
    with subprocess.Popen(
        [sys.executable, "-c", WRITER_PROCESS, str(tmp_path)], stdout=subprocess.PIPE, text=True
    ) as writer:
        assert writer.stdout is not None
        acknowledged = [writer.stdout.readline().split() for _ in range(300)]
        writer.kill()  # SIGKILL: mid-append, mid-eviction, wherever it is
        # only whole lines are acknowledgements: the kill can cut the last one short
        acknowledged += [line.split() for line in writer.stdout.read().split("\n")[:-1]]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a torn last line is cut off, with a warning
        with OwnerRegistry(tmp_path) as owners:
            for owner in "ab":
                owners.session(owner)
    recorded = recorded_by_owner(tmp_path, ["a", "b"])
    for owner, content in acknowledged:
        assert content in recorded[owner]
    assert len(recorded["a"]) + len(recorded["b"]) <= len(acknowledged) + 1  # at most one unread


@pytest.mark.parametrize("directory", ["~/plans", "~", Path("~/.plans")], ids=str)
def test_a_directory_starting_with_a_tilde_is_refused_not_made_here(
    directory: str | Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `dsh-todo mcp --log-dir ~/plans` expands it; Python does not, and would make ./~/plans
    monkeypatch.chdir(tmp_path)
    shown = str(directory)
    with pytest.raises(
        UsageError,
        match=rf"^directory '{re.escape(shown)}' starts with ~.*"
        rf"Path\('{re.escape(shown)}'\)\.expanduser\(\)$",
    ):
        OwnerRegistry(directory)
    assert list(tmp_path.iterdir()) == []


def test_an_async_sessions_turn_start_and_plan_are_awaited() -> None:
    # an open_session may hand out a session whose append (and latest) are coroutines
    from dsh_tool_todo.integrations._reminder import aplan_of
    from dsh_tool_todo.stores.memory import AsyncMemorySession

    class AsyncLatest(AsyncMemorySession):
        async def latest(self, types: Any, /) -> Any:  # type: ignore[override]
            return super().latest(types)

    session = AsyncLatest()
    owners = OwnerRegistry(open_session=lambda key: session)
    plan = {"todos": [{"content": "a", "status": "pending"}]}

    async def main() -> tuple[Any, Any]:
        await owners.acall("a", todo_write_tool(allow_parallel_in_progress=False), plan)
        before = await aplan_of(owners, "a")
        await owners.astart_turn("a")
        return before, await aplan_of(owners, "a")

    assert asyncio.run(main()) == (plan["todos"], None)
    assert [event["type"] for event in session.events] == [EVENT_TYPE, "turn/start"]


def test_a_sync_start_turn_refuses_an_async_session_and_writes_nothing() -> None:
    from dsh_tool_todo.stores.memory import AsyncMemorySession

    session = AsyncMemorySession()
    owners = OwnerRegistry(open_session=lambda key: session)
    with pytest.raises(UsageError, match=r"turn/start was not written: .*await .*astart_turn"):
        owners.start_turn("a")
    assert session.events == []
    asyncio.run(owners.astart_turn("a"))
    assert [event["type"] for event in session.events] == ["turn/start"]
