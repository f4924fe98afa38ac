"""The checks every framework adapter passes: the test template for a new adapter.

An adapter's test writes a small driver (:class:`Driver`: what the framework
offers the model, and one model turn through the framework's real loop, owned
by a given session) and runs :data:`CHECKS` on it, as
``tests/integrations/test_adapter_contract.py`` does for the adapters shipped.
Each check asserts what the model reads and what the session recorded:

- the model is offered exactly our name, description and parameters;
- a refused call reaches the model through the framework's error channel with
  the tool's own text, and records nothing;
- a valid call whose append fails reads ``NOT_RECORDED``, its cause logged on
  the ``dsh_tool_todo`` logger, and so does one whose owner's session its store
  cannot open (the log held by another writer, the store out of reach, a file
  system that refuses);
- the calls of one owner are recorded one at a time, in call order, even when
  the framework runs them concurrently;
- the framework's tool-call id is recorded beside the list (``callId``), or
  none where the framework has no stable id (MCP);
- a call retried with the same id within the turn records once, in the real stores
  (memory and JSONL).
"""

from __future__ import annotations

import asyncio
import errno
import json
import logging
import os
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from dsh_tool_todo import todo_write_tool
from dsh_tool_todo.core import contract
from dsh_tool_todo.core.contract import EVENT_TYPE
from dsh_tool_todo.core.schema import parameters
from dsh_tool_todo.errors import LogBusy, StoreUnavailable
from dsh_tool_todo.stores.jsonl import JsonlSession
from dsh_tool_todo.stores.memory import MemorySession

__all__ = [
    "CHECKS",
    "Driver",
    "FailingSession",
    "RecordingSession",
    "Reply",
    "SlowSession",
    "Unopenable",
    "opener",
]

PLAN_A = {"todos": [{"content": "Read the code", "status": "in_progress"}]}
PLAN_B = {"todos": [{"content": "Read the code", "status": "completed"}]}
BAD = {**PLAN_A, "merge": True}
CAUSE = "No space left on device"


@dataclass(frozen=True)
class Reply:
    """What the model read back for one call."""

    text: str
    error: bool | None  # the framework's error flag; None: it has none, the text is all


class Driver(Protocol):
    """What a check needs from an adapter under test."""

    call_ids: bool
    """Whether the adapter records the framework's tool-call id."""

    def offered(self, *, parallel: bool) -> tuple[str, str, Mapping[str, Any]]:
        """The name, description and parameters the framework offers the model."""

    def turn(self, calls: Sequence[tuple[str, Any]], session: Any) -> list[Reply]:
        """One model turn making ``calls`` (tool-call id, arguments) through the framework's
        own loop, every call owned by ``session``; what the model read, in call order."""


class RecordingSession:
    """A session recording the data of each append (a plain, sync ``append``)."""

    def __init__(self) -> None:
        self.data: list[dict[str, Any]] = []

    def append(self, type: str, data: Mapping[str, Any], /) -> dict[str, Any]:
        self.data.append(dict(data))
        return {"seq": len(self.data) - 1, "type": type, "data": data}

    # the rest of a store session, as an OwnerRegistry's open_session must return one
    def subscribe(self, listener: Callable[[Any], None], /) -> Callable[[], None]:
        return lambda: None

    def latest(self, types: Sequence[str], /) -> dict[str, Any] | None:
        if not self.data:
            return None
        return {"seq": len(self.data) - 1, "type": EVENT_TYPE, "data": self.data[-1]}

    def close(self) -> None:
        pass


class FailingSession(RecordingSession):
    def append(self, type: str, data: Mapping[str, Any], /) -> dict[str, Any]:
        raise OSError(28, CAUSE)


class Unopenable(RecordingSession):
    """Stands for a session its store cannot open: a registry a driver builds on it
    (``OwnerRegistry(open_session=opener(session))``) raises ``error`` when it opens one."""

    def __init__(self, error: BaseException) -> None:
        super().__init__()
        self.error = error

    def open(self, key: str) -> RecordingSession:
        raise self.error


def opener(session: Any) -> Callable[[str], Any]:
    """The ``open_session`` of a driver's registry, whose every owner is ``session``, or for
    an :class:`Unopenable`, whose store cannot open any owner's session."""
    if isinstance(session, Unopenable):
        return session.open
    return lambda key: session


class SlowSession(RecordingSession):
    """An async ``append`` that yields mid-write and notes any overlapping append."""

    def __init__(self) -> None:
        super().__init__()
        self.active = 0
        self.overlapped = False

    async def append(self, type: str, data: Mapping[str, Any], /) -> dict[str, Any]:  # type: ignore[override]
        self.active += 1
        self.overlapped |= self.active > 1
        await asyncio.sleep(0.01)
        self.active -= 1
        return super().append(type, data)


def check_offered_exactly_ours(driver: Driver) -> None:
    for parallel, description in (
        (False, contract.DESCRIPTION_SINGLE),
        (True, contract.DESCRIPTION_PARALLEL),
    ):
        name, offered_description, offered_parameters = driver.offered(parallel=parallel)
        assert (name, offered_description) == (contract.TOOL_NAME, description)
        assert dict(offered_parameters) == parameters()


def check_refusal_through_the_error_channel(driver: Driver) -> None:
    expected = todo_write_tool(allow_parallel_in_progress=False).call(BAD, MemorySession())
    assert expected.startswith("Error:")  # what the model reads is the tool's refusal
    session = RecordingSession()
    (reply,) = driver.turn([("c-bad", BAD)], session)
    assert reply.text == expected
    assert reply.error in (True, None)
    assert session.data == []


def _turn_logging_errors(driver: Driver, session: Any) -> tuple[Reply, list[str]]:
    """One call's reply, and the ERROR messages the ``dsh_tool_todo`` logger got meanwhile."""
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    logger = logging.getLogger("dsh_tool_todo")
    logger.addHandler(handler)
    try:
        (reply,) = driver.turn([("c-1", PLAN_A)], session)
    finally:
        logger.removeHandler(handler)
    return reply, [r.getMessage() for r in records if r.levelno == logging.ERROR]


def check_not_recorded_with_the_cause_logged(driver: Driver) -> None:
    reply, errors = _turn_logging_errors(driver, FailingSession())
    assert reply.text == contract.NOT_RECORDED
    assert reply.error in (True, None)
    (message,) = errors
    assert "was not recorded" in message
    assert CAUSE in message


def check_unopened_not_recorded_with_the_cause_logged(driver: Driver) -> None:
    for cause in (
        LogBusy("me.jsonl: another session is writing this log (one writer per log)"),
        StoreUnavailable("session 'me' on PostgreSQL at 127.0.0.1:1/none: refused"),
        OSError(errno.EEXIST, "File exists"),
    ):
        reply, errors = _turn_logging_errors(driver, Unopenable(cause))
        assert reply.text == contract.NOT_RECORDED
        assert reply.error in (True, None)
        (message,) = errors
        assert "was not recorded" in message
        assert f"its session could not be opened: {cause}" in message


def check_calls_of_one_owner_serialised(driver: Driver) -> None:
    plans = [{"todos": [{"content": f"Step {n}", "status": "pending"}]} for n in range(5)]
    session = SlowSession()
    replies = driver.turn([(f"c{n}", plan) for n, plan in enumerate(plans)], session)
    assert [reply.text for reply in replies] == [
        "Updated todo list: 1 pending, 0 in progress, 0 completed."
    ] * len(plans)
    assert not session.overlapped
    assert [data["todos"] for data in session.data] == [plan["todos"] for plan in plans]


def check_call_id_recorded(driver: Driver) -> None:
    session = RecordingSession()
    driver.turn([("call-7", PLAN_A)], session)
    if driver.call_ids:
        assert session.data == [{**PLAN_A, contract.CALL_ID_KEY: "call-7"}]
    else:  # the data is exactly the specification's {todos}
        assert session.data == [PLAN_A]


def check_repeated_call_id_records_once(driver: Driver) -> None:
    if not driver.call_ids:  # pragma: no cover - a driver set up wrongly
        raise AssertionError("this framework gives no stable call id: do not run this check")
    with tempfile.TemporaryDirectory() as folder:
        # the real stores: the rule is theirs (once per turn), not a stand-in's
        for session in (MemorySession(), JsonlSession(os.path.join(folder, "s.jsonl"))):
            with session:
                session.append(contract.TURN_START, {})
                first = driver.turn([("call-1", PLAN_A)], session)
                retried = driver.turn([("call-1", PLAN_A)], session)  # a durable engine's retry
                driver.turn([("call-2", PLAN_B)], session)  # a new call, recorded
                assert retried == first
                assert [event["data"] for event in read_events(session)] == [
                    {},
                    {**PLAN_A, contract.CALL_ID_KEY: "call-1"},
                    {**PLAN_B, contract.CALL_ID_KEY: "call-2"},
                ]


def read_events(session: MemorySession | JsonlSession) -> list[dict[str, Any]]:
    if isinstance(session, MemorySession):
        return [dict(event) for event in session.events]
    with open(session.path, encoding="utf-8") as file:
        return [json.loads(line) for line in file]


CHECKS: dict[str, Callable[[Driver], None]] = {
    "offered": check_offered_exactly_ours,
    "refusal": check_refusal_through_the_error_channel,
    "not_recorded": check_not_recorded_with_the_cause_logged,
    "unopened": check_unopened_not_recorded_with_the_cause_logged,
    "serialised": check_calls_of_one_owner_serialised,
    "call_id": check_call_id_recorded,
    "repeated_call_id": check_repeated_call_id_records_once,
}
