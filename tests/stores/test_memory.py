"""The store contract's parts that apply to the in-memory session."""

from __future__ import annotations

import sys
import threading

import pytest

from dsh_tool_todo.stores.memory import MemorySession

from .contract import Opener, SessionContract


class TestMemorySession(SessionContract):
    @pytest.fixture
    def open_session(self) -> Opener:
        return MemorySession


def test_listeners_subscribing_at_once_to_a_new_session_are_all_called() -> None:
    # A new session makes its listener list on the first subscribe: two first subscribers at
    # once must not each make one and lose the other's.
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for _ in range(100):
            assert _heard_by_four_first_subscribers(MemorySession()) == [0, 1, 2, 3]
    finally:
        sys.setswitchinterval(interval)


def _heard_by_four_first_subscribers(session: MemorySession) -> list[int]:
    heard: list[int] = []
    start = threading.Barrier(4)

    def subscribe(number: int) -> None:
        start.wait()
        session.subscribe(lambda event: heard.append(number))

    threads = [threading.Thread(target=subscribe, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    session.append("turn/end", {})
    return sorted(heard)


def test_a_listener_may_subscribe_another_from_inside_an_append() -> None:
    session = MemorySession()
    heard: list[str] = []

    def first(event: dict[str, object]) -> None:
        heard.append(f"first {event['seq']}")
        if event["seq"] == 0:
            session.subscribe(lambda event: heard.append(f"second {event['seq']}"))

    session.subscribe(first)
    session.append("turn/start", {})
    session.append("turn/end", {})
    assert heard == ["first 0", "first 1", "second 1"]
