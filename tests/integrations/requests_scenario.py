"""The one request every adapter's requests test files: a person asks for "Read the code" to be
marked completed.

Two ways to meet it. An owner whose durable (JSONL) log holds :data:`PLAN` (:func:`planned`,
:func:`planned_owner`), the request filed against that log as a person files one
(:func:`ask`), then a write that honours it (:data:`HONOURED`). Or the one conversation the
tests that measure request bytes run: the agent writes ``PLAN_A``, reads a file (while the
``look`` tool runs, the person asks), then writes ``PLAN_B``, which honours the request, and
ends: four model requests. The notice must reach the third one after its newest message,
once, and change no byte before it; a run where no one asks is the comparison
(:func:`assert_told_after_the_newest`).

Either way the model must read :func:`notice` once, and the log and ``PlanRequests.read``
must show what :func:`assert_honoured` checks.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from dsh_tool_todo.core.contract import EVENT_TYPE, REQUEST_NOTIFIED, REQUEST_TAKEN
from dsh_tool_todo.core.requests import Request
from dsh_tool_todo.plans.reminder import request_notice
from dsh_tool_todo.stores.jsonl import read_events
from dsh_tool_todo.stores.owners import OwnerRegistry
from dsh_tool_todo.stores.requests import PlanRequests
from tests._builders import PLAN_A, PLAN_B

OWNER = "ada"
PLAN = PLAN_A
HONOURED: dict[str, Any] = {"todos": PLAN_B}
"""``todo_write``'s arguments that honour the request."""
ASKED: dict[str, str] = {"kind": "done", "content": "Read the code", "by": "grace"}

SYSTEM = "You fix bugs."
PROMPT = "Fix the parser bug"
CALLS: list[tuple[str, dict[str, Any]]] = [
    ("todo_write", {"todos": PLAN_A}),
    ("look", {"path": "a.py"}),  # a person asks while it runs
    ("todo_write", {"todos": PLAN_B}),  # the answer to the request that held the notice
]
TOLD_AT = 2  # the index of the model request the notice reaches


def notice() -> str:
    """The notice of :data:`ASKED`, as the model reads it."""
    text = request_notice([Request("any", "done", ASKED["content"], ASKED["by"], 0, 0.0)])
    assert text is not None
    return text


def planned(directory: Path, owner: str = OWNER) -> tuple[OwnerRegistry, Path]:
    """A registry whose ``owner`` has a JSONL log holding :data:`PLAN`; that log."""
    owners = OwnerRegistry(directory)
    owners.session(owner).append(EVENT_TYPE, {"todos": PLAN})
    return owners, owners.path(owner)


@contextmanager
def planned_owner(directory: Path, *, asked: bool) -> Iterator[OwnerRegistry]:
    """:func:`planned`'s registry, closed at the end. With ``asked``, a person's request waits
    for :data:`OWNER` from the start, and once the registry is closed the log must show it
    told and honoured (:func:`assert_honoured`)."""
    owners, log = planned(directory)
    request = ask(log) if asked else None
    try:
        yield owners
    finally:
        owners.close()
    if request is not None:
        assert_honoured(log, request)


def ask(log: Path) -> Request:
    """File :data:`ASKED` against ``log``, as a person watching the plan does. From a thread of
    its own, as a person's process would: a scripted model may call this from inside the
    agent's event loop."""
    with ThreadPoolExecutor(1) as person:
        return person.submit(
            PlanRequests(log).file, ASKED["kind"], ASKED["content"], by=ASKED["by"]
        ).result()


def look(log: Path | None, path: str) -> str:
    """The ``look`` tool's body: it reads a file; with ``log``, a person files :data:`ASKED`
    against that log meanwhile."""
    if log is not None:
        ask(log)
    return f"contents of {path}"


async def alook(log: Path | None, path: str) -> str:
    """:func:`look` for a framework that awaits its tools."""
    if log is not None:
        await PlanRequests(log).afile(ASKED["kind"], ASKED["content"], by=ASKED["by"])
    return f"contents of {path}"


def assert_honoured(log: Path, asked: Request | None = None) -> None:
    """The log took the request (``asked``, when given), told, in one event; then the last
    write honoured it."""
    events = [dict(event) for event in read_events(log)]
    types = [event["type"] for event in events]
    assert types.count(REQUEST_TAKEN) == 1
    assert REQUEST_NOTIFIED not in types  # taken and told in one event
    taken = types.index(REQUEST_TAKEN)
    assert events[taken]["data"]["told"] is True
    answer = max(i for i, event in enumerate(events) if event["type"] == EVENT_TYPE)
    assert taken < answer
    assert events[answer]["data"]["todos"] == PLAN_B
    found = PlanRequests(log).read()
    (state,) = found.taken
    request = state.request
    assert (request.kind, request.content, request.by) == (
        ASKED["kind"],
        ASKED["content"],
        ASKED["by"],
    )
    assert (state.status, state.notified) == ("honoured", True)
    assert state.settled_seq == events[answer]["seq"]
    assert found.waiting == []
    if asked is not None:
        assert events[taken]["data"]["id"] == asked.id
        assert request.id == asked.id


def assert_told_after_the_newest(
    plain: list[list[bytes]], asked: list[list[bytes]], told: bytes, *, kept: bool
) -> None:
    """Measured request bytes, one list a model request: the asked run's request
    :data:`TOLD_AT` is the plain run's with ``told`` after its newest message, every request
    before it is as the plain run's, and no plain request holds it. With ``kept``, the
    framework keeps the notice in its history, where it was put, never told again; else the
    next request is as the plain run's."""
    assert len(plain) == len(asked) == len(CALLS) + 1
    assert asked[:TOLD_AT] == plain[:TOLD_AT]
    assert asked[TOLD_AT] == [*plain[TOLD_AT], told]
    after = TOLD_AT + 1
    if kept:
        assert_kept(plain, asked)
        assert asked[after].count(told) == 1
    else:
        assert asked[after] == plain[after]
    assert all(told not in request for request in plain)


def assert_kept(plain: list[list[bytes]], asked: list[list[bytes]]) -> None:
    """The request after :data:`TOLD_AT` starts with all of that one, then goes on as the plain
    run's does."""
    told, after = asked[TOLD_AT], asked[TOLD_AT + 1]
    assert after[: len(told)] == told
    assert after[len(told) :] == plain[TOLD_AT + 1][len(plain[TOLD_AT]) :]
