"""The ordered forwarder: session events to an async consumer, in log order, whatever thread
appends (finding 5 of the hardening issue), and a failure never fails the append."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping
from typing import Any

import pytest

import dsh_tool_todo
from dsh_tool_todo.core.contract import EVENT_TYPE, TURN_START
from dsh_tool_todo.errors import UsageError
from dsh_tool_todo.host import Host, HostAgent, MemorySession
from dsh_tool_todo.plans.forwarding import MAX_KEPT_ERRORS, OrderedForwarder, event_loop
from tests._builders import options, todo, todos


class _Sink:
    """The consumer: records each update it is sent, yielding first so later sends could try
    to overtake; ``fail_on`` makes that send (counted from 1) raise."""

    def __init__(self, fail_on: int | None = None) -> None:
        self.sent: list[list[str]] = []
        self.calls = 0
        self.fail_on = fail_on

    async def send(self, update: list[str]) -> None:
        self.calls += 1
        await asyncio.sleep(0)
        if self.calls == self.fail_on:
            raise ConnectionError("pipe closed")
        self.sent.append(update)


def _contents(event: Mapping[str, Any]) -> list[str] | None:
    """A write's contents; nothing to send for any other event."""
    if event["type"] != EVENT_TYPE:
        return None
    return [item["content"] for item in event["data"]["todos"]]


def _forwarder(session: Any, sink: _Sink) -> OrderedForwarder[list[str]]:
    return OrderedForwarder(session, _contents, sink.send, asyncio.get_running_loop())


def _forwarded_session(
    sink: _Sink | None = None,
) -> tuple[MemorySession, _Sink, OrderedForwarder[list[str]]]:
    """A new session whose events go to ``sink`` (a new one by default); call it on the loop."""
    session, sink = MemorySession(), _Sink() if sink is None else sink
    return session, sink, _forwarder(session, sink)


def _forwarded_agent() -> tuple[Host, HostAgent, _Sink, OrderedForwarder[list[str]]]:
    """A new agent of a new host whose writes go to a new sink; call it on the loop."""
    host = Host([dsh_tool_todo], options(False))
    agent = host.new_agent()
    sink = _Sink()
    return host, agent, sink, _forwarder(agent.session, sink)


def _call(host: Host, agent: HostAgent, content: str) -> None:
    assert host.call_tool("todo_write", todos(todo(content)), agent=agent).startswith("Updated")


@pytest.mark.parametrize("then_on_the_loop", [["B"], []], ids=["then a loop write", "alone"])
def test_a_write_from_a_worker_thread_is_sent_first_and_drain_waits_for_it(
    then_on_the_loop: list[str],
) -> None:
    async def main() -> None:
        host, agent, sink, forwarder = _forwarded_agent()
        worker = threading.Thread(target=_call, args=(host, agent, "A"))
        worker.start()
        worker.join()  # the loop is blocked: A's hand-over waits in the loop's queue
        for content in then_on_the_loop:  # and must not be overtaken by a later loop write
            await host.acall_tool("todo_write", todos(todo(content)), agent=agent)
        await forwarder.drain()  # nor missed by drain
        assert sink.sent == [["A"]] + [[content] for content in then_on_the_loop]

    asyncio.run(main())


def test_many_trials_of_workers_racing_the_loop() -> None:
    async def trial(number: int) -> None:
        host, agent, sink, forwarder = _forwarded_agent()

        def worker() -> None:
            for step in range(3):
                _call(host, agent, f"w{number}.{step}")

        running = asyncio.ensure_future(asyncio.to_thread(worker))
        for step in range(3):
            await host.acall_tool("todo_write", todos(todo(f"l{number}.{step}")), agent=agent)
            await asyncio.sleep(0)
        await running
        await forwarder.drain()
        logged = [_contents(event) for event in agent.session.events]
        assert sink.sent == logged  # every update, in log order
        assert sink.sent[-1] == [
            item["content"] for item in host.projection(agent.session, "todos")
        ]

    async def main() -> None:
        for number in range(200):
            await trial(number)

    asyncio.run(main())


def test_an_event_converted_to_none_is_not_sent() -> None:
    async def main() -> None:
        session, sink, forwarder = _forwarded_session()
        session.append(TURN_START, {})
        session.append(EVENT_TYPE, todos(todo("a")))
        await forwarder.drain()
        assert sink.sent == [["a"]]
        assert sink.calls == 1

    asyncio.run(main())


def test_a_failing_convert_never_fails_the_append_and_is_raised_by_drain_once() -> None:
    async def main() -> None:
        session, sink, forwarder = _forwarded_session()
        session.append(EVENT_TYPE, {"items": []})  # no "todos": _contents raises KeyError
        session.append(EVENT_TYPE, todos(todo("later")))
        assert len(session.events) == 2
        with pytest.raises(KeyError, match="todos"):
            await forwarder.drain()
        await forwarder.drain()  # reported once
        assert sink.sent == [["later"]]

    asyncio.run(main())


def test_failures_no_one_drains_are_kept_up_to_a_bound() -> None:
    async def main() -> None:
        session, _sink, forwarder = _forwarded_session()
        for n in range(MAX_KEPT_ERRORS + 50):
            session.append(EVENT_TYPE, {"items": [n]})  # each convert raises KeyError
        assert len(forwarder._errors) == MAX_KEPT_ERRORS
        with pytest.raises(KeyError, match="todos"):
            await forwarder.drain()
        await forwarder.drain()

    asyncio.run(main())


def test_a_failed_send_is_raised_by_drain_and_later_updates_still_go() -> None:
    async def main() -> None:
        session, sink, forwarder = _forwarded_session(_Sink(fail_on=1))
        session.append(EVENT_TYPE, todos(todo("lost")))
        session.append(EVENT_TYPE, todos(todo("kept")))
        with pytest.raises(ConnectionError, match="pipe closed"):
            await forwarder.drain()
        assert sink.sent == [["kept"]]

    asyncio.run(main())


def test_calling_the_forwarder_unsubscribes_and_what_was_queued_still_goes() -> None:
    async def main() -> None:
        session, sink, forwarder = _forwarded_session()
        session.append(EVENT_TYPE, todos(todo("queued")))
        forwarder()
        forwarder()  # twice is harmless
        session.append(EVENT_TYPE, todos(todo("after")))
        await forwarder.drain()
        assert sink.sent == [["queued"]]

    asyncio.run(main())


def test_drain_on_another_loop_is_refused() -> None:
    session = MemorySession()

    async def make() -> OrderedForwarder[list[str]]:
        return _forwarder(session, _Sink())

    forwarder = asyncio.run(make())
    with pytest.raises(UsageError, match=r"await drain\(\) on the event loop the forwarder"):
        asyncio.run(forwarder.drain())


def test_event_loop_is_the_given_one_or_the_running_one_or_an_error_naming_the_caller() -> None:
    with pytest.raises(UsageError, match=r"^forward_things needs the host's event loop"):
        event_loop(None, "forward_things")
    loop = asyncio.new_event_loop()
    try:
        assert event_loop(loop, "forward_things") is loop
        assert loop.run_until_complete(_running()) is loop
    finally:
        loop.close()


async def _running() -> asyncio.AbstractEventLoop:
    return event_loop(None, "forward_things")
