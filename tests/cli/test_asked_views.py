"""What a person asked, beside the plan in the terminal (JSONL and PostgreSQL): ``watch`` draws
it under each redraw, as ``show`` prints it, and redraws when a request event is logged; the
``not_honoured`` signal shows under the plan in ``show`` and ``watch``."""

from __future__ import annotations

import queue
import signal
import subprocess
import threading
import time
from typing import IO, Any

import pytest

from dsh_tool_todo.cli._plans import REDRAW_SEPARATOR
from dsh_tool_todo.core.contract import EVENT_TYPE
from dsh_tool_todo.stores import open_session
from dsh_tool_todo.stores._inbox import take_requests
from dsh_tool_todo.stores.requests import PlanRequests
from tests._builders import todo, todos

from .test_cli import dsh_todo, start_watch

Place = tuple[str, str]  # (source, session name)

PLAN = todos(todo("Write the tests", "in_progress"), todo("Ship it"))
ANSWER = todos(todo("Write the tests", "in_progress"), todo("Ship it"), todo("Tell the team"))
DRAWN = ["[>] Write the tests", "[ ] Ship it"]
ANSWERED = [*DRAWN, "[ ] Tell the team", "0/3 completed, 1 in progress"]
NOT_HONOURED = (
    '! not_honoured (1) at seq 4 - asked for and not done by the end of the turn: "Ship it"'
)


@pytest.fixture
def place(store_place: str) -> Place:
    return store_place, "ada"


def append(place: Place, kind: str, data: object) -> None:
    with open_session(*place) as agent:
        agent.append(kind, data)


def file_two(place: Place) -> None:
    """grace asks for "Ship it" done and "Tell the team" added (they wait in the inbox)."""
    requests = PlanRequests(*place)
    requests.file("done", "Ship it", by="grace")
    requests.file("add", "Tell the team", by="grace")


def take(place: Place) -> None:
    """The agent's writer takes what waits, telling the model (one ``request/taken`` each)."""
    with open_session(*place) as agent:
        assert len(take_requests(agent)) == 2


def asked_and_half_answered(place: Place) -> None:
    """Seq 0 the plan, 1-2 the two requests taken, 3 a write that adds the item only."""
    append(place, EVENT_TYPE, PLAN)
    file_two(place)
    take(place)
    append(place, EVENT_TYPE, ANSWER)


def test_show_health_shows_a_request_the_turn_ended_without_honouring(place: Place) -> None:
    asked_and_half_answered(place)
    append(place, "turn/end", {})
    shown = dsh_todo("show", *_where(place), "--ascii").stdout.splitlines()
    assert shown == [
        *ANSWERED,
        NOT_HONOURED,
        '? mark "Ship it" completed (asked by grace): not_honoured',
        '? add "Tell the team" (asked by grace): honoured',
    ]


def test_watch_draws_what_the_log_took_and_redraws_on_each_request_event(place: Place) -> None:
    append(place, EVENT_TYPE, PLAN)
    file_two(place)  # waiting in the inbox: watch draws what the log took
    with start_watch(*_where(place)) as watcher:
        try:
            lines = Lines(watcher)
            first = [*DRAWN, "0/2 completed, 1 in progress"]
            assert lines.redraw(first) == first
            take(place)  # request events only: the plan is the same
            taken = [
                *first,
                '? mark "Ship it" completed (asked by grace): pending',
                '? add "Tell the team" (asked by grace): pending',
            ]
            assert lines.redraw(taken) == taken
            append(place, EVENT_TYPE, ANSWER)
            honoured = '? add "Tell the team" (asked by grace): honoured'
            answered = [*ANSWERED, '? mark "Ship it" completed (asked by grace): pending', honoured]
            assert lines.redraw(answered) == answered
            append(place, "turn/end", {})  # no plan event: how a request stands changed
            ended = [
                *ANSWERED,
                NOT_HONOURED,
                '? mark "Ship it" completed (asked by grace): not_honoured',
                honoured,
            ]
            assert lines.redraw(ended) == ended
            watcher.send_signal(signal.SIGINT)
            assert watcher.wait(timeout=30) == 0
            assert lines.rest() == []  # the last redraw had no more lines
        finally:
            watcher.kill()


def test_watch_health_shows_a_request_the_turn_ended_without_honouring(place: Place) -> None:
    asked_and_half_answered(place)
    append(place, "turn/end", {})
    with start_watch(*_where(place)) as watcher:
        try:
            drawn = [
                *ANSWERED,
                NOT_HONOURED,
                '? mark "Ship it" completed (asked by grace): not_honoured',
                '? add "Tell the team" (asked by grace): honoured',
            ]
            assert Lines(watcher).redraw(drawn) == drawn
        finally:
            watcher.kill()


def _where(place: Place) -> list[str]:
    return [place[0], "--session", place[1]]


class Lines:
    """What a ``watch`` prints, line by line, read on a thread of its own: a redraw that never
    comes fails the test after a deadline instead of blocking it."""

    def __init__(self, watcher: subprocess.Popen[str]) -> None:
        assert watcher.stdout is not None
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, args=(watcher.stdout,), daemon=True).start()
        self._held: list[str] = []

    def _pump(self, stream: IO[str]) -> None:
        for line in stream:
            self._lines.put(line.rstrip("\n"))
        self._lines.put(None)

    def redraw(self, wanted: list[str], within: float = 30) -> list[str]:
        """The lines of the first redraw from here that are ``wanted`` (its title left out;
        when piped, a separator line comes before each redraw), or the last one drawn when
        none is within ``within`` seconds."""
        deadline = time.monotonic() + within
        block = self._held
        while time.monotonic() < deadline:
            try:
                line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            if line is None:
                break
            if line == REDRAW_SEPARATOR:
                block = []
                continue
            block.append(line)
            if block[1:] == wanted:
                self._held = []
                return block[1:]
        return block[1:]

    def rest(self) -> list[str]:
        """The lines printed after the last redraw matched, once the command ended."""
        found = []
        while (line := self._lines.get(timeout=30)) is not None:
            found.append(line)
        return found


def test_a_log_rotated_away_between_two_reads_of_a_redraw_keeps_what_was_read_last(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The plan was read, then the log was gone for the read of what was asked: watch ended
    with an error (and with --no-health, which made no second read before, too)."""
    import argparse
    import io

    from dsh_tool_todo.cli import _plans

    asked = {"id": "r1", "kind": "note", "content": "hi", "by": "grace", "planSeq": 0, "at": 0}
    reads = iter([([], [{**asked, "status": "pending"}]), FileNotFoundError("gone")])

    def turn_state(target: str, session: str | None) -> Any:
        read = next(reads)
        if isinstance(read, Exception):
            raise read
        return read

    plans = [[{"content": "Ship it", "status": "pending"}]] * 2
    monkeypatch.setattr(_plans, "_pick", lambda args: ("a.jsonl", None, False))
    monkeypatch.setattr(_plans, "follow_plans", lambda *a, **k: ("a.jsonl", iter(plans)))
    monkeypatch.setattr(_plans, "turn_state", turn_state)
    out = io.StringIO()
    args = argparse.Namespace(wait=False, log=None, session=None, interval=0.2, ascii=True)
    assert _plans.watch(argparse.Namespace(**vars(args), health=False), out) == 0
    first, second = out.getvalue().split(f"{_plans.REDRAW_SEPARATOR}\n")
    assert first == second
    assert first.endswith("? note: hi (asked by grace): pending\n")
