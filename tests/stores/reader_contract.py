"""The reader contract: one suite every store's :class:`~dsh_tool_todo.protocols.LogReader` runs.

A store's test module subclasses :class:`ReaderContract` and supplies six
fixtures: ``reader`` (a reader over a store that starts empty), ``open_writer``
(the store's own writer for a session name), ``write_raw`` (one event stored as
a foreign program would store it, unchecked), ``delete`` (remove a session's
log), ``where`` (how the reader names its store) and ``owner_names`` (whether
the store names each owner's log after its key). pytest collects the inherited
tests under the subclass's name, as for the writer suite in
:mod:`tests.stores.contract`. A store whose logs are files adds
:class:`FileReaderContract` (torn tails, rewrites in place).
"""

from __future__ import annotations

import abc
import asyncio
import os
import re
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any, Protocol, TypeVar

import pytest

from dsh_tool_todo.core.contract import EVENT_TYPE, SESSION_END_EVENT_TYPE
from dsh_tool_todo.core.links import End, end_data
from dsh_tool_todo.errors import InvalidLog, LogReplaced, SessionNotFound
from dsh_tool_todo.protocols import LogReader, StoreSession
from tests._builders import plan

from .contract import FOREIGN_DATA, HOSTILE_DATA

Event = dict[str, Any]
Writer = Callable[[str], StoreSession]
RawWriter = Callable[[str, Event], None]
Deleter = Callable[[str], None]
T = TypeVar("T")
WITHIN = 10.0  # seconds any one read or follow step may take before the test fails


class Runner(Protocol):
    def __call__(self, coro: Coroutine[Any, Any, T], /) -> T: ...


async def take(events: AsyncIterator[Event], count: int) -> list[Event]:
    return [await anext(events) for _ in range(count)]


async def next_of(events: AsyncIterator[Event]) -> Event:
    """``anext(events)``, called only once the task runs: a task cancelled before its first step
    (a loop closed at the end of a test) then leaves no un-awaited ``asend`` behind."""
    return await anext(events)


class ReaderContract(abc.ABC):
    """What every store's reader promises."""

    @pytest.fixture
    def run(self) -> Iterator[Runner]:
        """Runs a test's coroutines, each bounded in time, on one event loop per test (a
        store's reader may hold connections bound to the loop that opened them)."""
        loop = asyncio.new_event_loop()  # asyncio.Runner, which Python 3.10 lacks

        def call(coro: Coroutine[Any, Any, T]) -> T:
            return loop.run_until_complete(asyncio.wait_for(coro, WITHIN))

        try:
            yield call
        finally:
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    @abc.abstractmethod
    @pytest.fixture
    def reader(self, run: Runner) -> LogReader:
        """A reader over this test's store, which starts with no session (a fixture that
        yields it may close it with ``run(reader.aclose())``)."""

    @abc.abstractmethod
    @pytest.fixture
    def open_writer(self) -> Writer:
        """Open the store's own writer on session ``name`` (a context manager)."""

    @abc.abstractmethod
    @pytest.fixture
    def write_raw(self) -> RawWriter:
        """Store ``event`` in session ``name`` as a foreign program would: unchecked."""

    @abc.abstractmethod
    @pytest.fixture
    def delete(self) -> Deleter:
        """Remove session ``name``'s log, as ``dsh-todo sessions --delete`` or ``rm`` would."""

    @abc.abstractmethod
    @pytest.fixture
    def where(self) -> str:
        """How the reader must name its store in messages (never with a password)."""

    @abc.abstractmethod
    @pytest.fixture
    def owner_names(self) -> bool:
        """Whether the store names each owner's log after its key (``OwnerRegistry``'s file
        names), so that a viewer shows the owner beside the session."""

    def write(self, open_writer: Writer, name: str, events: list[tuple[str, Any]]) -> None:
        with open_writer(name) as session:
            for kind, data in events:
                session.append(kind, data)

    # --- what a viewer asks of the store ---------------------------------------------

    def test_the_reader_names_its_store_in_one_printable_line(
        self, reader: LogReader, where: str
    ) -> None:
        assert reader.where == where
        assert reader.where
        assert reader.where.isprintable()

    @pytest.mark.parametrize(
        ("name", "owner"),
        [
            ("alice%40example.com", "alice@example.com"),
            ("%42ob%20%53mith", "Bob Smith"),
            ("plain", "plain"),
            ("not%zzowner", None),  # no owner key encodes to it
            ("Upper", None),  # an owner's file name is lower case
            ("", None),
        ],
    )
    def test_owner_of_decodes_only_an_owners_exact_file_name(
        self, reader: LogReader, owner_names: bool, name: str, owner: str | None
    ) -> None:
        assert reader.owner_of(name) == (owner if owner_names else None)

    def test_a_held_list_still_shows_every_change(
        self, run: Runner, reader: LogReader, open_writer: Writer, delete: Deleter
    ) -> None:
        self.write(open_writer, "first", [(EVENT_TYPE, plan("A"))])
        reader.hold_list()
        reader.hold_list()  # holding twice holds once

        async def lists() -> list[list[tuple[str, int | None]]]:
            seen = []
            for step in range(3):
                if step == 1:
                    await asyncio.to_thread(self.write, open_writer, "second", [("note", {})])
                if step == 2:
                    await asyncio.to_thread(delete, "first")
                rows, _ = await reader.sessions("", 10)
                seen.append(sorted((row.name, row.last_seq) for row in rows))
            return seen

        assert run(lists()) == [
            [("first", 0)],
            [("first", 0), ("second", 0)],
            [("second", 0)],
        ]

    # --- sessions, snapshot, tail ---------------------------------------------------

    def test_unknown_sessions_are_not_found_by_every_read(
        self, run: Runner, reader: LogReader
    ) -> None:
        async def reads() -> None:
            with pytest.raises(SessionNotFound, match="missing"):
                await reader.snapshot("missing")
            with pytest.raises(SessionNotFound, match="missing"):
                await reader.tail("missing", before=None, limit=5)
            with pytest.raises(SessionNotFound, match="missing"):
                await anext(reader.follow("missing", after=-1))

        run(reads())

    @pytest.mark.parametrize("name", ["", "../outside", "a/b", "nul\x00", "back\\slash"])
    def test_hostile_names_are_unknown_sessions(
        self, run: Runner, reader: LogReader, name: str
    ) -> None:
        with pytest.raises(SessionNotFound, match=f"^{re.escape(name)}$"):
            run(reader.snapshot(name))

    def test_sessions_lists_each_session_with_its_progress(
        self, run: Runner, reader: LogReader, open_writer: Writer
    ) -> None:
        done = {"todos": [{"content": "A", "status": "completed"}, *plan("B")["todos"]]}
        self.write(open_writer, "alpha", [(EVENT_TYPE, done)])
        self.write(open_writer, "beta", [(EVENT_TYPE, plan("X")), ("turn/start", {})])

        rows, total = run(reader.sessions("", 10))
        found, _ = run(reader.sessions("alp", 10))

        progress = {row.name: row.progress for row in rows}
        assert total == 2
        assert set(progress) == {"alpha", "beta"}
        assert progress["alpha"] is not None
        assert progress["beta"] is not None
        assert (progress["alpha"].completed, progress["alpha"].total) == (1, 2)
        assert progress["beta"].cleared is True
        assert [row.name for row in found] == ["alpha"]

    def test_sessions_name_each_parent_from_the_head_link(
        self, run: Runner, reader: LogReader, open_writer: Writer, write_raw: RawWriter
    ) -> None:
        hostile = "pa\x1b[31m\nrent\u202e\U0001f642"
        with open_writer("root") as root:
            root.append(EVENT_TYPE, plan("Delegate"))
        with open_writer("child") as child:
            child.link("root", parent_call_id="call_1")  # type: ignore[attr-defined]
            child.append(EVENT_TYPE, plan("Search"))
        with open_writer("orphan") as orphan:
            orphan.link(hostile)  # type: ignore[attr-defined]
        write_raw("odd", {"seq": 0, "type": "session/link", "data": {"parent": 5}})
        write_raw("late", {"seq": 0, "type": "turn/start", "data": {}})
        write_raw("late", {"seq": 1, "type": "session/link", "data": {"parent": "root"}})

        rows, _ = run(reader.sessions("", 10))
        parents = {row.name: row.parent for row in rows}
        progress = {row.name: row.progress for row in rows}

        assert parents == {
            "root": None,
            "child": "root",
            "orphan": hostile,  # a parent the store does not hold is named, not refused
            "odd": None,  # a malformed link names no parent
            "late": None,  # a link counts at the head of the log only
        }
        assert progress["child"] is not None
        assert progress["child"].total == 1
        snapshot = run(reader.snapshot("child"))
        assert snapshot.last_seq == 1
        assert snapshot.deciding is not None
        assert snapshot.deciding["seq"] == 1
        page = run(reader.tail("child", before=None, limit=10))
        assert page.events[0] == {
            "seq": 0,
            "type": "session/link",
            "data": {"parent": "root", "parentCallId": "call_1"},
        }

    def test_snapshot_is_the_newest_seq_and_the_deciding_event(
        self, run: Runner, reader: LogReader, open_writer: Writer
    ) -> None:
        self.write(open_writer, "s", [(EVENT_TYPE, plan("A")), ("note", {}), ("note", {})])

        snapshot = run(reader.snapshot("s"))

        assert snapshot.last_seq == 2
        assert snapshot.deciding == {"seq": 0, "type": EVENT_TYPE, "data": plan("A")}

    def test_a_session_without_a_deciding_event_has_none(
        self, run: Runner, reader: LogReader, open_writer: Writer
    ) -> None:
        self.write(open_writer, "s", [("note", {})])
        assert run(reader.snapshot("s")).deciding is None

    def test_tail_pages_from_the_end_and_walk_back_by_cursor(
        self, run: Runner, reader: LogReader, open_writer: Writer
    ) -> None:
        self.write(open_writer, "s", [("note", {"n": n}) for n in range(10)])

        last = run(reader.tail("s", before=None, limit=3))
        seen: list[int] = []
        page = last
        while True:
            seen[:0] = [event["seq"] for event in page.events]
            if not page.more:
                break
            assert page.cursor is not None
            page = run(reader.tail("s", before=page.cursor, limit=3))

        assert [event["seq"] for event in last.events] == [7, 8, 9]
        assert last.more
        assert last.events[-1] == {"seq": 9, "type": "note", "data": {"n": 9}}
        assert seen == list(range(10))
        assert page.cursor is None

    def test_tail_before_a_seq_deep_in_the_log(
        self, run: Runner, reader: LogReader, open_writer: Writer
    ) -> None:
        self.write(open_writer, "s", [("note", {"n": n}) for n in range(3000)])

        page = run(reader.tail("s", before=1234, limit=4))

        assert [event["seq"] for event in page.events] == [1230, 1231, 1232, 1233]
        assert page.more

    def test_a_filtered_walk_finds_every_match_once_in_order(
        self, run: Runner, reader: LogReader, open_writer: Writer
    ) -> None:
        events = [(EVENT_TYPE, plan(f"v{n}")) if n % 7 == 0 else ("note", {}) for n in range(60)]
        self.write(open_writer, "s", events)
        types = frozenset({EVENT_TYPE, "turn/start"})

        found: list[int] = []
        before: int | None = None
        for _ in range(100):
            page = run(reader.tail("s", before=before, limit=2, types=types))
            assert all(event["type"] in types for event in page.events)
            found[:0] = [event["seq"] for event in page.events]
            if not page.more:
                break
            before = page.cursor
        assert found == [n for n in range(60) if n % 7 == 0]

    def test_hostile_rows_come_back_as_written(
        self, run: Runner, reader: LogReader, open_writer: Writer
    ) -> None:
        self.write(open_writer, "s", [(EVENT_TYPE, HOSTILE_DATA), ("x/foreign", FOREIGN_DATA)])

        page = run(reader.tail("s", before=None, limit=5))

        assert [event["data"] for event in page.events] == [HOSTILE_DATA, FOREIGN_DATA]
        assert run(reader.snapshot("s")).deciding == page.events[0]

    # --- the one check of a foreign todo/write --------------------------------------

    def test_a_foreign_invalid_write_is_refused_by_every_read(
        self, run: Runner, reader: LogReader, open_writer: Writer, write_raw: RawWriter
    ) -> None:
        self.write(open_writer, "s", [(EVENT_TYPE, plan("A"))])
        write_raw("s", {"seq": 1, "type": EVENT_TYPE, "data": {"todos": "x"}})

        async def reads() -> None:
            for read in (
                reader.snapshot("s"),
                reader.tail("s", before=None, limit=5),
                anext(reader.follow("s", after=0)),
            ):
                with pytest.raises(InvalidLog, match="todos"):
                    await read

        run(reads())

    # --- follow ---------------------------------------------------------------------

    def test_follow_catches_up_from_a_seq_then_goes_live(
        self, run: Runner, reader: LogReader, open_writer: Writer
    ) -> None:
        self.write(open_writer, "s", [("note", {"n": n}) for n in range(5)])

        async def follow() -> list[Event]:
            events = reader.follow("s", after=2)
            caught_up = await take(events, 2)
            await asyncio.to_thread(self.write, open_writer, "s", [(EVENT_TYPE, plan("B"))])
            return caught_up + await take(events, 1)

        seqs = [event["seq"] for event in run(follow())]
        assert seqs == [3, 4, 5]

    def test_follow_from_a_snapshot_misses_nothing(
        self, run: Runner, reader: LogReader, open_writer: Writer
    ) -> None:
        self.write(open_writer, "s", [(EVENT_TYPE, plan("A"))])

        async def follow() -> list[Event]:
            snapshot = await reader.snapshot("s")
            events = reader.follow("s", after=snapshot.last_seq, since=snapshot)
            await asyncio.to_thread(
                self.write, open_writer, "s", [("note", {}), ("turn/start", {})]
            )
            return await take(events, 2)

        assert [(event["seq"], event["type"]) for event in run(follow())] == [
            (1, "note"),
            (2, "turn/start"),
        ]

    def test_a_log_deleted_and_written_again_is_replaced(
        self, run: Runner, reader: LogReader, open_writer: Writer, delete: Deleter
    ) -> None:
        self.write(open_writer, "s", [(EVENT_TYPE, plan(f"old {n}")) for n in range(4)])

        async def follow() -> None:
            events = reader.follow("s", after=3)
            waiting = asyncio.ensure_future(next_of(events))
            await asyncio.sleep(0.2)  # the follower is live
            await asyncio.to_thread(delete, "s")
            await asyncio.to_thread(
                self.write, open_writer, "s", [(EVENT_TYPE, plan("new")), ("note", {})]
            )
            await waiting

        with pytest.raises(LogReplaced, match=r"\S"):  # a message that says which log
            run(follow())

    # --- the list's summary and its changes -------------------------------------------

    def test_a_summary_carries_the_first_links_parent_last_seq_and_item_in_progress(
        self, run: Runner, reader: LogReader, write_raw: RawWriter, open_writer: Writer
    ) -> None:
        write_raw("child", {"seq": 0, "type": "session/link", "data": {"parent": "boss"}})
        write_raw("child", {"seq": 1, "type": "session/link", "data": {"parent": "other"}})
        working = {"todos": [*plan("A")["todos"], {"content": "B", "status": "in_progress"}]}
        write_raw("child", {"seq": 2, "type": EVENT_TYPE, "data": working})
        self.write(open_writer, "orphan", [(EVENT_TYPE, plan("X"))])

        rows = {row.name: row for row in run(reader.sessions("", 10))[0]}

        assert (rows["child"].parent, rows["child"].last_seq) == ("boss", 2)
        assert rows["child"].working_on == "B"
        assert (rows["orphan"].parent, rows["orphan"].last_seq) == (None, 0)
        assert rows["orphan"].working_on is None

    def test_a_summary_carries_how_the_run_ended_while_its_end_is_the_newest_plan_fact(
        self, run: Runner, reader: LogReader, write_raw: RawWriter, open_writer: Writer
    ) -> None:
        """The row says what ``dsh-todo sessions`` says: the end when the newest of the plan
        events and ends is a well-formed ``session/end``; a write after it starts a run again."""
        self.write(open_writer, "done", [(EVENT_TYPE, plan("A"))])
        self.write(open_writer, "failed", [(EVENT_TYPE, plan("B")), ("message/user", {})])
        self.write(open_writer, "never", [(SESSION_END_EVENT_TYPE, end_data("finished"))])
        self.write(open_writer, "running", [(EVENT_TYPE, plan("C"))])

        def ends() -> dict[str, End | None]:
            return {row.name: row.end for row in run(reader.sessions("", 10))[0]}

        # read once before the other ends: nothing kept stale after them
        assert ends() == {"done": None, "failed": None, "never": End("finished"), "running": None}
        self.write(open_writer, "done", [(SESSION_END_EVENT_TYPE, end_data("finished"))])
        self.write(open_writer, "failed", [(SESSION_END_EVENT_TYPE, end_data("failed", "down"))])
        self.write(open_writer, "failed", [("message/user", {})])  # not a plan fact: still ended
        self.write(open_writer, "running", [(SESSION_END_EVENT_TYPE, end_data("finished"))])
        self.write(open_writer, "running", [(EVENT_TYPE, plan("C again"))])  # run again
        write_raw("odd", {"seq": 0, "type": EVENT_TYPE, "data": plan("D")})
        write_raw("odd", {"seq": 1, "type": SESSION_END_EVENT_TYPE, "data": {"outcome": "x"}})

        assert ends() == {
            "done": End("finished"),
            "failed": End("failed", "down"),
            "never": End("finished"),
            "running": None,
            "odd": None,  # an end no wrapper writes is no end
        }

    def test_changes_name_the_sessions_appended_to_created_and_deleted(
        self, run: Runner, reader: LogReader, open_writer: Writer, delete: Deleter
    ) -> None:
        self.write(open_writer, "quiet", [(EVENT_TYPE, plan("Q"))])
        self.write(open_writer, "busy", [(EVENT_TYPE, plan("A"))])

        async def watch() -> list[frozenset[str]]:
            changes = reader.changes()
            seen: list[frozenset[str]] = []
            first = asyncio.ensure_future(anext(changes))
            await asyncio.sleep(0.3)  # the watch is live
            await asyncio.to_thread(self.write, open_writer, "busy", [("note", {})])
            seen.append(await first)
            rows = {row.name: row.last_seq for row in (await reader.sessions("", 10))[0]}
            assert rows == {"quiet": 0, "busy": 1}
            await asyncio.to_thread(self.write, open_writer, "new", [("turn/start", {})])
            seen.append(await anext(changes))
            await asyncio.to_thread(delete, "quiet")
            seen.append(await anext(changes))
            rows = {row.name: row.last_seq for row in (await reader.sessions("", 10))[0]}
            assert rows == {"busy": 1, "new": 0}
            await changes.aclose()
            return seen

        assert run(watch()) == [frozenset({"busy"}), frozenset({"new"}), frozenset({"quiet"})]

    def test_a_session_deleted_and_written_again_under_changes_shows_its_new_log(
        self, run: Runner, reader: LogReader, open_writer: Writer, delete: Deleter
    ) -> None:
        self.write(open_writer, "s", [(EVENT_TYPE, plan("old")), ("note", {}), ("note", {})])

        async def watch() -> tuple[int | None, str | None]:
            changes = reader.changes()
            first = asyncio.ensure_future(anext(changes))
            await asyncio.sleep(0.3)
            await asyncio.to_thread(delete, "s")
            working = {"todos": [{"content": "new", "status": "in_progress"}]}
            await asyncio.to_thread(self.write, open_writer, "s", [(EVENT_TYPE, working)])
            names = await first
            assert names <= {"s"}
            while True:  # the delete and the new log may be told apart or together
                rows = (await reader.sessions("", 10))[0]
                if rows and rows[0].last_seq == 0:
                    break
                await anext(changes)
            await changes.aclose()
            return rows[0].last_seq, rows[0].working_on

        assert run(watch()) == (0, "new")


class FileReaderContract(ReaderContract):
    """What a reader of logs kept in files promises besides: torn tails, rewrites in place."""

    @abc.abstractmethod
    @pytest.fixture
    def log_path(self) -> Callable[[str], Path]:
        """The file of session ``name``."""

    @pytest.fixture
    def append_bytes(self, log_path: Callable[[str], Path]) -> Callable[[str, bytes], None]:
        def append(name: str, data: bytes) -> None:
            with log_path(name).open("ab") as log:
                log.write(data)

        return append

    @pytest.mark.parametrize("length", [1, 6, 7, 40])
    def test_a_torn_tail_is_ignored_and_its_line_read_once_whole(
        self,
        run: Runner,
        reader: LogReader,
        open_writer: Writer,
        append_bytes: Callable[[str, bytes], None],
        length: int,
    ) -> None:
        self.write(open_writer, "s", [(EVENT_TYPE, plan("A"))])
        whole = b'{"seq":1,"type":"todo/write","data":{"todos":[]}}\n'
        append_bytes("s", whole[:length])

        async def follow() -> Event:
            snapshot = await reader.snapshot("s")
            page = await reader.tail("s", before=None, limit=5)
            assert snapshot.last_seq == 0
            assert [event["seq"] for event in page.events] == [0]
            events = reader.follow("s", after=0, since=snapshot)
            await asyncio.sleep(0.1)
            await asyncio.to_thread(append_bytes, "s", whole[length:])
            return await anext(events)

        assert run(follow()) == {"seq": 1, "type": EVENT_TYPE, "data": {"todos": []}}

    @pytest.mark.parametrize("size", [0, 5])
    def test_a_log_cut_short_under_a_follower_is_replaced(
        self,
        run: Runner,
        reader: LogReader,
        open_writer: Writer,
        log_path: Callable[[str], Path],
        size: int,
    ) -> None:
        self.write(open_writer, "s", [(EVENT_TYPE, plan("A")), ("note", {})])

        async def follow() -> None:
            events = reader.follow("s", after=1)
            waiting = asyncio.ensure_future(next_of(events))
            await asyncio.sleep(0.1)
            os.truncate(log_path("s"), size)
            await waiting

        with pytest.raises(LogReplaced, match=r"s\.jsonl"):
            run(follow())

    def test_a_same_size_rewrite_under_a_follower_is_replaced(
        self, run: Runner, reader: LogReader, open_writer: Writer, log_path: Callable[[str], Path]
    ) -> None:
        self.write(open_writer, "s", [(EVENT_TYPE, plan("Cut"))])
        rewritten = log_path("s").read_bytes().replace(b"Cut", b"Cuz")

        async def follow() -> None:
            snapshot = await reader.snapshot("s")
            events = reader.follow("s", after=snapshot.last_seq, since=snapshot)
            waiting = asyncio.ensure_future(next_of(events))
            await asyncio.sleep(0.1)
            log_path("s").write_bytes(rewritten)
            await waiting

        with pytest.raises(LogReplaced, match=r"s\.jsonl"):
            run(follow())
