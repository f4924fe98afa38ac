"""The session-store contract: one test suite that every store runs.

A store's test module subclasses :class:`SessionContract` (every store) or
:class:`DurableContract` (stores whose log outlives the session object) and
supplies the fixtures marked abstract; pytest collects the inherited tests
for each subclass. Writing the promises once keeps the stores from drifting
apart: a store that breaks one fails here, under its own name.
"""

from __future__ import annotations

import abc
import json
import logging
import threading
from collections.abc import Callable
from typing import Any, ClassVar

import pytest

import dsh_tool_todo
from dsh_tool_todo.core.contract import CALL_ID_KEY, EVENT_TYPE
from dsh_tool_todo.errors import InvalidLog, LinkConflict, TodoError, UsageError
from dsh_tool_todo.host import Host
from dsh_tool_todo.protocols import StoreSession

Event = dict[str, Any]
Opener = Callable[[], StoreSession]

RESUME = (EVENT_TYPE, "turn/start")
PLAN = [
    {"content": "Read the report command", "status": "completed"},
    {"content": "Add the --json flag", "status": "in_progress"},
]
# What the tool accepts and a store must keep: NUL, lone surrogates, line and
# paragraph separators, bidi and C1 controls, astral characters, and key order.
HOSTILE_CONTENT = 'nul\x00 lone\ud800 low\udfff sep\u2028\u2029 nel\x85 csi\x9b rlo\u202e 🙂 \\ "'
HOSTILE_DATA = {
    "todos": [
        {"status": "pending", "content": HOSTILE_CONTENT},
        {"content": "z-first key order", "status": "completed"},
    ]
}
OTHER_PLAN = [{"content": "Ship it", "status": "pending"}]


def write_data(plan: list[dict[str, str]], call: str | None = None) -> dict[str, Any]:
    """A todo/write's data as the tool records it, with the call id when there is one."""
    return {"todos": plan} if call is None else {"todos": plan, CALL_ID_KEY: call}


FOREIGN_DATA = {"zeta": 1, "alpha": {"\x00": "\udfff", "b": [None, True, 1.5]}, "mid": ""}


def new_host() -> Host:
    return Host([dsh_tool_todo], {"dsh-tool-todo": {"allowParallelInProgress": False}})


def todo_call(host: Host, agent: Any, plan: list[dict[str, str]]) -> str:
    text: str = host.call_tool("todo_write", {"todos": plan}, agent=agent)
    return text


class SessionContract(abc.ABC):
    """What every store's session promises (the memory store included)."""

    @abc.abstractmethod
    @pytest.fixture
    def open_session(self) -> Opener:
        """Open a session on this test's log, which starts empty."""

    def test_a_fresh_log_is_empty(self, open_session: Opener) -> None:
        with open_session() as session:
            assert session.latest(RESUME) is None
            assert session.append("turn/start", {})["seq"] == 0

    def test_append_returns_the_event_with_seqs_from_zero_without_gaps(
        self, open_session: Opener
    ) -> None:
        with open_session() as session:
            events = [session.append("note", {"n": n}) for n in range(5)]
        assert [event["seq"] for event in events] == [0, 1, 2, 3, 4]
        assert events[3] == {"seq": 3, "type": "note", "data": {"n": 3}}

    def test_concurrent_appends_get_unique_seqs_heard_in_log_order(
        self, open_session: Opener
    ) -> None:
        heard: list[int] = []
        with open_session() as session:
            session.subscribe(lambda event: heard.append(event["seq"]))
            results: list[int] = []

            def work(worker: int) -> None:
                for n in range(20):
                    results.append(session.append("note", {"w": worker, "n": n})["seq"])

            threads = [threading.Thread(target=work, args=(w,)) for w in range(4)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        assert sorted(results) == list(range(80))
        assert heard == list(range(80))

    def test_listeners_run_in_order_in_the_appending_thread(self, open_session: Opener) -> None:
        calls: list[tuple[str, int, int]] = []
        with open_session() as session:
            session.subscribe(lambda e: calls.append(("a", e["seq"], threading.get_ident())))
            session.subscribe(lambda e: calls.append(("b", e["seq"], threading.get_ident())))
            session.append("note", {})
            session.append("note", {})
        me = threading.get_ident()
        assert calls == [("a", 0, me), ("b", 0, me), ("a", 1, me), ("b", 1, me)]

    def test_a_raising_listener_is_logged_and_never_fails_the_append(
        self, open_session: Opener, caplog: pytest.LogCaptureFixture
    ) -> None:
        heard: list[int] = []

        def broken(event: Event) -> None:
            raise RuntimeError("redraw failed")

        with open_session() as session, caplog.at_level(logging.ERROR, "dsh_tool_todo"):
            session.subscribe(broken)
            session.subscribe(lambda event: heard.append(event["seq"]))
            event = session.append(EVENT_TYPE, {"todos": PLAN})
            assert session.latest(RESUME) == event
        assert heard == [0]
        assert "redraw failed" in caplog.text

    def test_unsubscribed_listeners_are_not_called(self, open_session: Opener) -> None:
        heard: list[int] = []
        with open_session() as session:
            unsubscribe = session.subscribe(lambda event: heard.append(event["seq"]))
            session.append("note", {})
            unsubscribe()
            session.append("note", {})
        assert heard == [0]

    def test_latest_is_the_newest_event_of_the_given_types(self, open_session: Opener) -> None:
        with open_session() as session:
            session.append(EVENT_TYPE, {"todos": PLAN})
            start = session.append("turn/start", {})
            session.append("note", {})
            assert session.latest(RESUME) == start
            assert session.latest([EVENT_TYPE]) == {
                "seq": 0,
                "type": EVENT_TYPE,
                "data": {"todos": PLAN},
            }
            assert session.latest([EVENT_TYPE, "turn/start"]) == start
            with pytest.raises(UsageError, match="collection of event types"):
                session.latest(EVENT_TYPE)

    def test_a_closed_session_refuses_appends(self, open_session: Opener) -> None:
        with open_session() as session:
            session.append("note", {})
        with pytest.raises(UsageError, match="closed"):
            session.append("note", {})

    def test_hostile_content_round_trips_with_its_key_order(self, open_session: Opener) -> None:
        with open_session() as session:
            session.append(EVENT_TYPE, HOSTILE_DATA)
            read = session.latest([EVENT_TYPE])
        assert read is not None
        assert repr(read["data"]) == repr(HOSTILE_DATA)

    def test_the_host_projects_the_current_plan(self, open_session: Opener) -> None:
        host = new_host()
        with open_session() as session:
            agent = host.new_agent(session=session)
            assert todo_call(host, agent, PLAN).startswith("Updated todo list")
            assert host.projection(session, "todos") == PLAN
            latest = session.latest(RESUME)
            assert latest is not None
            assert latest["data"]["todos"] == PLAN

    # --- sub-agent links (issue 21 §1) ------------------------------------------------

    def test_a_link_is_the_head_of_a_new_log_and_the_projection_ignores_it(
        self, open_session: Opener
    ) -> None:
        host = new_host()
        with open_session() as session:
            link = session.link("parent one", parent_call_id="call_1")  # type: ignore[attr-defined]
            agent = host.new_agent(session=session)
            assert host.projection(session, "todos") is None
            todo_call(host, agent, PLAN)
            assert session.latest(["session/link"]) == link
            assert session.latest(RESUME)["seq"] == 1  # type: ignore[index]
            assert host.projection(session, "todos") == PLAN
        assert link == {
            "seq": 0,
            "type": "session/link",
            "data": {"parent": "parent one", "parentCallId": "call_1"},
        }

    def test_linking_again_to_the_same_parent_records_nothing(self, open_session: Opener) -> None:
        with open_session() as session:
            session.link("p")  # type: ignore[attr-defined]
            session.append("turn/start", {})
            assert session.link("p", parent_call_id="another call") is None  # type: ignore[attr-defined]
            assert session.append("note", {})["seq"] == 2

    def test_another_parent_or_a_log_without_a_link_is_refused_and_nothing_written(
        self, open_session: Opener
    ) -> None:
        with open_session() as session:
            session.link("p")  # type: ignore[attr-defined]
            with pytest.raises(LinkConflict, match="started for parent 'p', not 'q'"):
                session.link("q")  # type: ignore[attr-defined]
            assert session.append("note", {})["seq"] == 1

    def test_a_bad_parent_is_refused_before_anything_is_written(self, open_session: Opener) -> None:
        with open_session() as session:
            with pytest.raises(UsageError, match="non-empty string"):
                session.link("")  # type: ignore[attr-defined]
            with pytest.raises(UsageError, match="parent_call_id must be"):
                session.link("p", parent_call_id=7)  # type: ignore[attr-defined]
            assert session.append("turn/start", {})["seq"] == 0

    def test_a_log_that_holds_events_and_no_link_cannot_be_linked(
        self, open_session: Opener
    ) -> None:
        with open_session() as session:
            session.append("turn/start", {})
            with pytest.raises(LinkConflict, match="holds 1 event and no link"):
                session.link("p")  # type: ignore[attr-defined]
            assert session.append("note", {})["seq"] == 1
            assert session.latest(["session/link"]) is None

    # --- idempotent appends: a call id recorded once per turn (issue 23) ----------------

    def test_a_repeated_call_id_records_nothing_and_answers_the_first_event(
        self, open_session: Opener
    ) -> None:
        heard: list[int] = []
        with open_session() as session:
            session.append("turn/start", {})
            session.subscribe(lambda event: heard.append(event["seq"]))
            first = session.append(EVENT_TYPE, write_data(PLAN, "call_1"))
            again = session.append(EVENT_TYPE, write_data(PLAN, "call_1"))
            assert (
                again == first == {"seq": 1, "type": EVENT_TYPE, "data": write_data(PLAN, "call_1")}
            )
            assert session.append("note", {})["seq"] == 2  # the seq was not consumed
            assert session.latest(RESUME) == first
        assert heard == [1, 2]  # the repeat told no listener: nothing happened

    def test_a_call_id_counts_once_per_turn_not_per_session(self, open_session: Opener) -> None:
        # Providers number calls afresh in every response (call_0, call_1, ...).
        with open_session() as session:
            before = session.append(EVENT_TYPE, write_data(PLAN, "call_0"))  # before any turn
            assert session.append(EVENT_TYPE, write_data(PLAN, "call_0")) == before
            session.append("turn/start", {})
            first = session.append(EVENT_TYPE, write_data(PLAN, "call_0"))
            assert first["seq"] == 2
            session.append("turn/start", {})
            assert session.append(EVENT_TYPE, write_data(OTHER_PLAN, "call_0"))["seq"] == 4
            assert session.append(EVENT_TYPE, write_data(OTHER_PLAN, "call_0"))["seq"] == 4

    def test_a_different_call_id_with_the_same_todos_is_a_new_call(
        self, open_session: Opener
    ) -> None:
        with open_session() as session:
            session.append("turn/start", {})
            assert session.append(EVENT_TYPE, write_data(PLAN, "call_1"))["seq"] == 1
            assert session.append(EVENT_TYPE, write_data(PLAN, "call_2"))["seq"] == 2
            assert session.append(EVENT_TYPE, write_data(PLAN))["seq"] == 3
            assert session.append(EVENT_TYPE, write_data(PLAN))["seq"] == 4  # no id: never one call
            assert (
                session.append("note", write_data(PLAN, "call_1"))["seq"] == 5
            )  # not a todo/write

    def test_a_repeated_call_id_with_another_plan_is_a_new_call_and_is_recorded(
        self, open_session: Opener
    ) -> None:
        # Providers that number ids afresh in every response send call_0 again, in the
        # same turn, with the plan of the next step: it is a new call, not a retry.
        heard: list[int] = []
        with open_session() as session:
            session.subscribe(lambda event: heard.append(event["seq"]))
            session.append("turn/start", {})
            session.append(EVENT_TYPE, write_data(PLAN, "call_1"))
            second = session.append(EVENT_TYPE, write_data(OTHER_PLAN, "call_1"))
            assert second == {
                "seq": 2,
                "type": EVENT_TYPE,
                "data": write_data(OTHER_PLAN, "call_1"),
            }
            assert session.latest(RESUME) == second
            assert session.append("note", {})["seq"] == 3
        assert heard == [0, 1, 2, 3]

    def test_a_retry_after_another_call_answers_with_its_own_first_event(
        self, open_session: Opener
    ) -> None:
        with open_session() as session:
            session.append("turn/start", {})
            first = session.append(EVENT_TYPE, write_data(PLAN, "call_0"))
            other = session.append(EVENT_TYPE, write_data(OTHER_PLAN, "call_0"))
            session.append(EVENT_TYPE, write_data(OTHER_PLAN, "call_1"))
            assert session.append(EVENT_TYPE, write_data(PLAN, "call_0")) == first
            assert session.append(EVENT_TYPE, write_data(OTHER_PLAN, "call_0")) == other
            assert session.append(EVENT_TYPE, write_data(OTHER_PLAN, "call_1"))["seq"] == 3
            reordered = {CALL_ID_KEY: "call_0", "todos": [dict(reversed(t.items())) for t in PLAN]}
            assert session.append(EVENT_TYPE, reordered) == first  # equal data: one call
            assert session.append("note", {})["seq"] == 4  # no seq was consumed by a retry

    @pytest.mark.parametrize("call", [7, None, ["call_1"], ""])
    def test_a_call_id_that_is_not_a_string_is_refused(
        self, open_session: Opener, call: object
    ) -> None:
        with open_session() as session:
            with pytest.raises(
                UsageError, match="callId must be the tool call's id as a non-empty str"
            ):
                session.append(EVENT_TYPE, {"todos": PLAN, CALL_ID_KEY: call})
            assert session.latest(RESUME) is None
            assert session.append("note", {})["seq"] == 0

    @pytest.mark.parametrize("data", [None, ["callId"], "callId"])
    def test_a_malformed_write_without_a_mapping_is_recorded_as_before(
        self, open_session: Opener, data: Any
    ) -> None:
        with open_session() as session:  # a host's bug, which the readers report
            assert session.append(EVENT_TYPE, data)["seq"] == 0
            assert session.append(EVENT_TYPE, data)["seq"] == 1

    def test_hostile_call_ids_are_keys_like_any_other(self, open_session: Opener) -> None:
        hostile = ["nul\x00", "lone\ud800", "x" * 10_000, "\U0001f642\u2028\x1b[2J"]
        with open_session() as session:
            session.append("turn/start", {})
            firsts = [session.append(EVENT_TYPE, write_data(PLAN, call)) for call in hostile]
            assert [session.append(EVENT_TYPE, write_data(PLAN, c)) for c in hostile] == firsts
            assert [event["seq"] for event in firsts] == [1, 2, 3, 4]
            assert session.append("note", {})["seq"] == 5

    def test_threads_repeating_one_call_id_record_it_once(self, open_session: Opener) -> None:
        with open_session() as session:
            session.append("turn/start", {})
            answers: list[int] = []

            def work() -> None:
                for n in range(10):
                    answers.append(session.append(EVENT_TYPE, write_data(PLAN, f"call_{n}"))["seq"])

            threads = [threading.Thread(target=work) for _ in range(4)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            assert sorted(answers) == sorted(list(range(1, 11)) * 4)
            assert session.append("note", {})["seq"] == 11

    def test_the_host_resumes_a_plan_written_with_a_call_id(self, open_session: Opener) -> None:
        with open_session() as session:
            session.append(EVENT_TYPE, write_data(PLAN, "call_1"))
            host = new_host()
            host.new_agent(session=session)
            assert host.projection(session, "todos") == PLAN


class DurableContract(SessionContract):
    """What a store whose log outlives its session objects adds: resume, one writer, readers."""

    refused_at_open: ClassVar[bool]
    """Whether a second writer is refused when it opens (else at its first append)."""

    @abc.abstractmethod
    @pytest.fixture
    def read_log(self) -> Callable[[], list[Event]]:
        """Every event of this test's log, read by the store's own reader (which validates)."""

    @abc.abstractmethod
    @pytest.fixture
    def write_foreign(self) -> Callable[[int, str, str], None]:
        """Record ``(seq, type, data as JSON text)`` as another program would, no session open."""

    @abc.abstractmethod
    @pytest.fixture
    def log_name(self) -> str:
        """How errors name this test's log (a path, a session id)."""

    @abc.abstractmethod
    def where(self, seq: int) -> str:
        """The regex by which a reader's error names the record holding ``seq``."""

    def test_a_reopened_log_keeps_its_link_and_refuses_another_parent(
        self, open_session: Opener, read_log: Callable[[], list[Event]]
    ) -> None:
        with open_session() as session:
            session.link("p", parent_call_id="c1")  # type: ignore[attr-defined]
            session.append("turn/start", {})
        with open_session() as session:
            assert session.link("p") is None  # type: ignore[attr-defined]
            with pytest.raises(LinkConflict, match="not 'q'"):
                session.link("q")  # type: ignore[attr-defined]
        assert [event["type"] for event in read_log()] == ["session/link", "turn/start"]

    def test_reopening_continues_the_seq(self, open_session: Opener) -> None:
        with open_session() as session:
            session.append("note", {})
            session.append("note", {})
        with open_session() as session:
            assert session.append("note", {})["seq"] == 2

    def test_a_host_resumes_the_plan_of_an_existing_log(self, open_session: Opener) -> None:
        with open_session() as session:
            first = new_host()
            todo_call(first, first.new_agent(session=session), PLAN)
        with open_session() as session:
            host = new_host()
            agent = host.new_agent(session=session)
            assert host.projection(session, "todos") == PLAN
            todo_call(host, agent, [{"content": "Next", "status": "pending"}])
        with open_session() as session:
            session.append("turn/start", {})
        with open_session() as session:
            host = new_host()
            host.new_agent(session=session)
            assert host.projection(session, "todos") is None

    def test_resuming_on_a_last_write_that_breaks_the_invariant_raises(
        self, open_session: Opener, write_foreign: Callable[[int, str, str], None]
    ) -> None:
        with open_session() as session:
            session.append(EVENT_TYPE, {"todos": PLAN})
        write_foreign(1, EVENT_TYPE, '{"todos":[{"content":"x","status":"done"}]}')
        with open_session() as session, pytest.raises(InvalidLog, match="status"):
            new_host().new_agent(session=session)

    @pytest.mark.parametrize(
        ("kind", "text", "problem"),
        [
            (EVENT_TYPE, '{"todos":[{"content":"x","status":"done"}]}', "status"),
            (EVENT_TYPE, '{"todos":[{"content":"a","status":"pending"}],"more":1}', "todos"),
            (
                EVENT_TYPE,
                '{"todos":[{"content":"a","status":"pending"},{"content":"a","status":"pending"}]}',
                "duplicate",
            ),
            (
                EVENT_TYPE,
                '{"todos":[{"content":"a","status":"pending"}],"callId":7}',
                "optionally with a non-empty string callId",
            ),
            (
                EVENT_TYPE,
                '{"todos":[{"content":"a","status":"pending"}],"callId":"c","x":1}',
                "optionally with a non-empty string callId",
            ),
            ("note", "[1, 2]", ""),
            ("note", '"just a string"', ""),
        ],
    )
    def test_foreign_records_that_are_not_events_are_refused_by_the_reader(
        self,
        read_log: Callable[[], list[Event]],
        write_foreign: Callable[[int, str, str], None],
        kind: str,
        text: str,
        problem: str,
    ) -> None:
        write_foreign(0, "turn/start", "{}")
        write_foreign(1, kind, text)
        with pytest.raises(InvalidLog, match=f"{self.where(1)}.*{problem}"):
            read_log()

    def test_hostile_data_round_trips_through_the_log(
        self, open_session: Opener, read_log: Callable[[], list[Event]]
    ) -> None:
        with open_session() as session:
            session.append(EVENT_TYPE, HOSTILE_DATA)
            session.append("note", FOREIGN_DATA)
        events = read_log()
        assert [event["seq"] for event in events] == [0, 1]
        assert repr(events[0]["data"]) == repr(HOSTILE_DATA)
        assert repr(events[1]["data"]) == repr(FOREIGN_DATA)
        assert json.dumps(events[1]["data"]) == json.dumps(FOREIGN_DATA)

    def test_a_call_id_of_the_current_turn_is_recognised_after_reopening(
        self, open_session: Opener, read_log: Callable[[], list[Event]]
    ) -> None:
        with open_session() as session:
            session.append("turn/start", {})
            old = session.append(EVENT_TYPE, write_data(PLAN, "call_old"))
            session.append("turn/start", {})
            first = session.append(EVENT_TYPE, write_data(PLAN, "call_1"))
            second = session.append(EVENT_TYPE, write_data(OTHER_PLAN, "call_2"))
            session.append("note", {})
        logged = read_log()
        heard: list[int] = []
        with open_session() as session:  # a restarted process replays the whole run
            session.subscribe(lambda event: heard.append(event["seq"]))
            assert session.append(EVENT_TYPE, write_data(PLAN, "call_1")) == first
            assert session.append(EVENT_TYPE, write_data(OTHER_PLAN, "call_2")) == second
            assert session.append(EVENT_TYPE, write_data(PLAN, "call_old"))["seq"] == 6  # old turn
            other = session.append(EVENT_TYPE, write_data(OTHER_PLAN, "call_1"))  # a new call
            assert other["seq"] == 7
            assert session.append(EVENT_TYPE, write_data(OTHER_PLAN, "call_1")) == other
        assert old["seq"] == 1
        assert heard == [6, 7]
        assert read_log()[:6] == logged
        assert len(read_log()) == 8

    def test_a_reopened_log_keys_calls_by_its_last_turn_start(self, open_session: Opener) -> None:
        with open_session() as session:
            session.append("turn/start", {})
            session.append(EVENT_TYPE, write_data(PLAN, "call_1"))
        with open_session() as session:
            session.append("turn/start", {})  # a new turn: the same id is a new call
            assert session.append(EVENT_TYPE, write_data(PLAN, "call_1"))["seq"] == 3
        with open_session() as session:
            assert session.append(EVENT_TYPE, write_data(PLAN, "call_1"))["seq"] == 3

    def test_readers_ignore_the_call_id(
        self, open_session: Opener, read_log: Callable[[], list[Event]]
    ) -> None:
        with open_session() as session:
            session.append(EVENT_TYPE, write_data(PLAN, "call_1"))
        assert read_log() == [{"seq": 0, "type": EVENT_TYPE, "data": write_data(PLAN, "call_1")}]

    def test_a_second_writer_is_refused_and_nothing_acknowledged_is_lost(
        self, open_session: Opener, read_log: Callable[[], list[Event]], log_name: str
    ) -> None:
        first = open_session()
        acknowledged = [first.append("note", {"by": "first"})]
        if self.refused_at_open:
            with pytest.raises(TodoError, match=log_name):
                open_session()
            acknowledged.append(first.append("note", {"by": "first"}))
        else:
            with open_session() as second:  # opened between two appends of the first
                acknowledged.append(second.append("note", {"by": "second"}))
            for _ in range(2):  # refused, and never retried under another seq
                with pytest.raises(TodoError, match=log_name):
                    first.append("note", {"by": "first, stale"})
        first.close()
        assert read_log() == acknowledged
