"""The JSON Lines session log: whole lines on disk, readable after a crash, and its plan."""

from __future__ import annotations

import doctest
import errno
import json
import os
import re
import threading
import warnings
from itertools import count
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dsh_tool_todo
from dsh_tool_todo.core.contract import EVENT_TYPE
from dsh_tool_todo.core.projection import replay
from dsh_tool_todo.errors import InvalidLog, TornTailWarning, UsageError
from dsh_tool_todo.host import Host
from dsh_tool_todo.protocols import StoreSession
from dsh_tool_todo.stores import jsonl as sessionlog
from dsh_tool_todo.stores.jsonl import JsonlSession, _lines, current_plan, read_events
from tests._builders import write_log
from tests.conftest import options, todo

DOC = Path(__file__).resolve().parents[3] / "docs" / "session-log.md"
TORN = "torn last line at byte"


def line(seq: int, kind: str, data: dict[str, Any]) -> bytes:
    event = {"seq": seq, "type": kind, "data": data}
    return json.dumps(event, ensure_ascii=True, separators=(",", ":")).encode() + b"\n"


def test_the_module_example_runs() -> None:
    assert doctest.testmod(sessionlog, raise_on_error=False).failed == 0


def test_the_documented_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.DOTALL)
    assert blocks
    monkeypatch.chdir(tmp_path)
    for block in blocks:
        exec(compile(block, str(DOC), "exec"), {})


def test_events_round_trip_one_line_each(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    written = write_log(
        path,
        [("turn/start", {}), (EVENT_TYPE, {"todos": [todo("Plan")]}), ("turn/end", {})],
    )
    assert written[1] == {"seq": 1, "type": EVENT_TYPE, "data": {"todos": [todo("Plan")]}}
    assert read_events(path) == written
    assert path.read_bytes().splitlines(keepends=True) == [
        line(0, "turn/start", {}),
        line(1, EVENT_TYPE, {"todos": [todo("Plan")]}),
        line(2, "turn/end", {}),
    ]


def test_lone_surrogates_are_written_as_ascii_and_read_back(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    text = "half a pair \ud83d, and a whole one \U0001f600 é"
    write_log(path, [("message", {"text": text})])
    assert path.read_bytes().isascii()
    assert read_events(path)[0]["data"] == {"text": text}


def test_seq_continues_after_reopening(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    write_log(path, [("turn/start", {}), ("turn/end", {})])
    with JsonlSession(path) as session:
        assert session.append("turn/start", {})["seq"] == 2
    assert [event["seq"] for event in read_events(path)] == [0, 1, 2]


def test_a_torn_tail_is_ignored_and_nothing_whole_is_lost(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    written = write_log(path, [(EVENT_TYPE, {"todos": [todo("Plan")]}), ("turn/end", {})])
    whole = path.stat().st_size
    with path.open("ab") as file:
        file.write(line(2, EVENT_TYPE, {"todos": [todo("Lost")]})[:25])
    with pytest.warns(TornTailWarning, match=f"log.jsonl: {TORN} {whole} ignored"):
        assert read_events(path) == written
    with pytest.warns(TornTailWarning, match=f"{TORN} {whole} ignored"):
        assert current_plan(path) == [todo("Plan")]


def test_a_whole_event_missing_its_newline_is_torn(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(line(0, "turn/end", {}) + line(1, "turn/end", {}).rstrip(b"\n"))
    with pytest.warns(TornTailWarning, match=TORN):
        assert len(read_events(path)) == 1


def test_reopening_cuts_a_torn_tail_off_then_appends_cleanly(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    write_log(path, [("turn/start", {})])
    whole = path.read_bytes()
    with path.open("ab") as file:
        file.write(b'{"seq":1,"type":"todo/wr')
    with pytest.warns(TornTailWarning, match=f"{TORN} {len(whole)} cut off"):
        session = JsonlSession(path)
    assert path.read_bytes() == whole
    with session:
        session.append(EVENT_TYPE, {"todos": [todo("Plan")]})
    assert path.read_bytes() == whole + line(1, EVENT_TYPE, {"todos": [todo("Plan")]})
    assert current_plan(path) == [todo("Plan")]
    assert [event["seq"] for event in read_events(path)] == [0, 1]


def test_a_log_that_is_only_a_torn_line_reopens_empty(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(b"\0\0\0\0")  # the file grew, its data never reached the disk
    with pytest.warns(TornTailWarning, match=f"{TORN} 0 cut off"), JsonlSession(path) as session:
        assert session.append("turn/start", {})["seq"] == 0
    assert path.read_bytes() == line(0, "turn/start", {})


def test_concurrent_appends_never_interleave(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    threads, appends = 8, 200
    start = threading.Barrier(threads)
    with JsonlSession(path) as session:

        def run(thread: int) -> None:
            start.wait()
            for index in range(appends):
                session.append("message", {"thread": thread, "index": index, "pad": "x" * index})

        workers = [threading.Thread(target=run, args=(n,)) for n in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
    events = [json.loads(raw) for raw in path.read_bytes().splitlines()]
    assert [event["seq"] for event in events] == list(range(threads * appends))
    for thread in range(threads):
        mine = [event["data"]["index"] for event in events if event["data"]["thread"] == thread]
        assert mine == list(range(appends))


def test_listeners_see_events_in_log_order_until_unsubscribed(tmp_path: Path) -> None:
    seen: list[int] = []
    with JsonlSession(tmp_path / "log.jsonl") as session:
        unsubscribe = session.subscribe(lambda event: seen.append(event["seq"]))
        session.append("turn/start", {})
        session.append("turn/end", {})
        unsubscribe()
        session.append("turn/start", {})
    assert seen == [0, 1]


def count_fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    monkeypatch.setattr(os, "fsync", calls.append)
    return calls


def test_fsync_on_syncs_every_append_and_a_new_files_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = count_fsyncs(monkeypatch)
    with JsonlSession(tmp_path / "log.jsonl", fsync=True) as session:
        assert len(calls) == 1  # the directory, so the new name survives a power cut
        for _ in range(5):
            session.append("turn/end", {})
    assert len(calls) == 6
    assert len(read_events(tmp_path / "log.jsonl")) == 5


def test_fsync_off_never_syncs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = count_fsyncs(monkeypatch)
    write_log(tmp_path / "log.jsonl", [("turn/end", {})] * 5)
    assert calls == []


def test_a_failed_write_leaves_only_whole_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "log.jsonl"
    real_write = os.write
    attempts = count()

    def half_then_full(fd: int, data: bytes) -> int:
        if next(attempts) == 0:
            return real_write(fd, data[: len(data) // 2])
        raise OSError(errno.ENOSPC, "No space left on device")

    with JsonlSession(path) as session:
        session.append("turn/start", {})
        monkeypatch.setattr(os, "write", half_then_full)
        with pytest.raises(OSError, match="No space left"):
            session.append(EVENT_TYPE, {"todos": [todo("Plan")]})
        monkeypatch.setattr(os, "write", real_write)
        assert session.append("turn/end", {})["seq"] == 1
    assert path.read_bytes() == line(0, "turn/start", {}) + line(1, "turn/end", {})


def test_short_writes_are_completed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "log.jsonl"
    real_write = os.write
    monkeypatch.setattr(os, "write", lambda fd, data: real_write(fd, data[:5]))
    write_log(path, [(EVENT_TYPE, {"todos": [todo("Plan")]})])
    assert path.read_bytes() == line(0, EVENT_TYPE, {"todos": [todo("Plan")]})


def test_a_closed_session_refuses_appends(tmp_path: Path) -> None:
    with JsonlSession(tmp_path / "log.jsonl") as session:
        pass
    assert session.closed
    session.close()
    with pytest.raises(UsageError, match=r"log\.jsonl: the session log is closed"):
        session.append("turn/start", {})


def test_a_file_that_is_not_a_log_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_bytes(b"shopping list\nmilk\n")
    with pytest.raises(InvalidLog, match=r"notes\.txt, line 1: not a session event"):
        read_events(path)
    with pytest.raises(InvalidLog, match=r"notes\.txt, line 2: not a session event"):
        current_plan(path)
    with pytest.raises(InvalidLog, match=r"notes\.txt, line 2: not a session event"):
        JsonlSession(path)
    assert path.read_bytes() == b"shopping list\nmilk\n"


@pytest.mark.parametrize("content", [b'{"name": "config"}', b"plain text, no newline"])
def test_a_foreign_file_without_newline_is_not_cut_off(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "other.json"
    path.write_bytes(content)
    with pytest.raises(InvalidLog, match=r"other\.json, line 1: not a session event"):
        JsonlSession(path)
    with pytest.raises(InvalidLog, match=r"other\.json, line 1: not a session event"):
        read_events(path)
    assert path.read_bytes() == content


def test_a_malformed_line_before_the_last_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(line(0, "turn/start", {}) + b'{"seq":1,"ty\n' + line(2, "turn/end", {}))
    with pytest.raises(InvalidLog, match=r"log\.jsonl, line 2: not a session event"):
        read_events(path)
    with pytest.raises(InvalidLog, match=r"log\.jsonl, line 2: not a session event"):
        current_plan(path)


def test_current_plan_checks_the_write_it_returns(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    write_log(path, [("turn/start", {}), (EVENT_TYPE, {"todos": [todo(" ")]})])
    with pytest.raises(InvalidLog, match=r"log\.jsonl, line 2: event 1: Error: invalid todo"):
        current_plan(path)
    with pytest.raises(InvalidLog, match=r"event 1: Error: invalid todo"):
        replay(read_events(path))


def test_current_plan_reads_only_the_end_of_the_log(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    filler = [("message", {"text": "x" * 1000})] * 300  # several blocks
    write_log(path, [*filler, (EVENT_TYPE, {"todos": [todo("Plan")]}), ("turn/end", {})])
    path.write_bytes(b"not a log line\n" + path.read_bytes())
    assert current_plan(path) == [todo("Plan")]  # the broken first line is never read
    with pytest.raises(InvalidLog, match="line 1"):
        read_events(path)


def test_an_event_larger_than_a_block(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    big = [todo(f"{n}: " + "é" * 1000) for n in range(3 * _lines.BLOCK_SIZE // 6000)]
    write_log(path, [(EVENT_TYPE, {"todos": big}), ("message", {"text": "ü" * 70_000})])
    assert len(path.read_bytes()) > 2 * _lines.BLOCK_SIZE
    assert current_plan(path) == big == replay(read_events(path))


def test_a_host_drives_projections_from_the_log(tmp_path: Path) -> None:
    path = tmp_path / "agent.jsonl"
    host = Host([dsh_tool_todo], options(False))
    plan = [todo("Read", "completed"), todo("Write", "in_progress"), todo("Test")]
    with JsonlSession(path) as session:
        agent = host.new_agent(session=session)
        reply = host.call_tool("todo_write", {"todos": plan}, agent=agent)
        assert reply == "Updated todo list: 1 pending, 1 in progress, 1 completed."
        assert host.projection(agent.session, "todos") == plan
        assert current_plan(path) == plan

        both = [todo("Write", "in_progress"), todo("Test", "in_progress")]
        reply = host.call_tool("todo_write", {"todos": both}, agent=agent)
        assert reply.startswith("Error: invalid todos: at most one task")
        assert current_plan(path) == plan
        assert len(read_events(path)) == 1

        agent.session.append("turn/start", {})
        assert host.projection(agent.session, "todos") is None
        assert current_plan(path) is None
    assert replay(read_events(path)) is None


# Generated logs: current_plan must agree with replaying the whole log.

_TEXT = st.text(st.characters(exclude_categories=()), max_size=40)
_CONTENT = _TEXT.filter(lambda text: bool(text) and not text.isspace())
_STATUS = st.sampled_from(["pending", "in_progress", "completed"])
_TODOS = st.lists(st.tuples(_CONTENT, _STATUS), max_size=5, unique_by=lambda item: item[0]).map(
    lambda items: {"todos": [todo(content, status) for content, status in items]}
)
_EVENT: st.SearchStrategy[tuple[str, dict[str, Any]]] = st.one_of(
    st.tuples(st.just(EVENT_TYPE), _TODOS),
    st.tuples(st.sampled_from(["turn/start", "turn/end"]), st.just({})),
    st.tuples(st.just("message"), st.fixed_dictionaries({"text": _TEXT})),
)
_NAMES = count()


def _cut(event: tuple[str, dict[str, Any]], fraction: float) -> bytes:
    whole = line(99, *event)
    return whole[: max(1, int(fraction * (len(whole) - 1)))]


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    events=st.lists(_EVENT, max_size=12),
    torn=st.one_of(
        st.none(),
        st.builds(_cut, _EVENT, st.floats(0, 1)),
        st.integers(1, 9).map(lambda size: b"\0" * size),
    ),
    block=st.sampled_from([1, 2, 7, 64, _lines.BLOCK_SIZE]),
)
def test_current_plan_agrees_with_a_full_replay(
    tmp_path: Path, events: list[tuple[str, dict[str, Any]]], torn: bytes | None, block: int
) -> None:
    path = tmp_path / f"{next(_NAMES)}.jsonl"
    written = write_log(path, events)
    if torn is not None:
        with path.open("ab") as file:
            file.write(torn)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert read_events(path) == written
        with mock.patch.object(_lines, "BLOCK_SIZE", block):
            assert current_plan(path) == replay(read_events(path))
    expected = [] if torn is None else [TornTailWarning] * 3
    assert [warning.category for warning in caught] == expected


# The session protocol's resume call: latest(types), read from the end.


def test_latest_is_the_newest_event_of_the_types(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    write_log(
        path,
        [(EVENT_TYPE, {"todos": [todo("Old")]}), ("turn/start", {}), ("turn/end", {})],
    )
    with JsonlSession(path) as session:
        assert session.latest((EVENT_TYPE, "turn/start")) == {
            "seq": 1,
            "type": "turn/start",
            "data": {},
        }
        assert session.latest({EVENT_TYPE}) == line_event(0, EVENT_TYPE, [todo("Old")])
        assert session.latest(("message",)) is None
        written = session.append(EVENT_TYPE, {"todos": [todo("New")]})
        assert session.latest([EVENT_TYPE, "turn/start"]) == written
        assert isinstance(session, StoreSession)


def line_event(seq: int, kind: str, todos: list[dict[str, str]]) -> dict[str, Any]:
    return {"seq": seq, "type": kind, "data": {"todos": todos}}


def test_latest_reads_only_back_to_its_answer(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(b"not an event\n" + line(1, EVENT_TYPE, {"todos": [todo("Plan")]}))
    with JsonlSession(path) as session:
        assert session.latest((EVENT_TYPE,))["seq"] == 1  # type: ignore[index]
        with pytest.raises(InvalidLog, match=r"log\.jsonl, line 1: not a session event"):
            session.latest(("turn/start",))


def test_latest_of_an_empty_log_is_none(tmp_path: Path) -> None:
    with JsonlSession(tmp_path / "log.jsonl") as session:
        assert session.latest((EVENT_TYPE, "turn/start")) is None


def test_latest_refuses_a_string_and_a_closed_session(tmp_path: Path) -> None:
    session = JsonlSession(tmp_path / "log.jsonl")
    with pytest.raises(UsageError, match="collection of event types, not the str 'todo/write'"):
        session.latest(EVENT_TYPE)
    session.close()
    with pytest.raises(UsageError, match=r"log\.jsonl: the session log is closed"):
        session.latest((EVENT_TYPE,))


def test_a_host_resumes_the_plan_of_an_existing_log(tmp_path: Path) -> None:
    path = tmp_path / "agent.jsonl"
    plan = [todo("Read", "completed"), todo("Write", "in_progress")]
    write_log(path, [("turn/start", {}), (EVENT_TYPE, {"todos": plan}), ("turn/end", {})])
    host = Host([dsh_tool_todo], options(False))
    with JsonlSession(path) as session:
        agent = host.new_agent(session=session)
        assert host.projection(agent.session, "todos") == plan
