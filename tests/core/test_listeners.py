"""Session listeners: called in order with each event; one that raises is logged, never
propagated, and the others still run."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from dsh_tool_todo.core.contract import TURN_START
from dsh_tool_todo.core.listeners import LOGGER_NAME, Listeners
from tests._builders import make_event

EVENT = make_event(TURN_START, seq=3)


def test_listeners_run_in_subscription_order_with_the_event() -> None:
    heard: list[tuple[str, Any]] = []
    listeners = Listeners()
    listeners.add(lambda event: heard.append(("first", event)))
    listeners.add(lambda event: heard.append(("second", event)))
    listeners.notify(EVENT)
    assert heard == [("first", EVENT), ("second", EVENT)]


def test_a_raising_listener_is_logged_and_the_others_still_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    heard: list[Any] = []

    def broken(event: Any) -> None:
        raise RuntimeError("terminal gone")

    listeners = Listeners()
    listeners.add(broken)
    listeners.add(heard.append)
    with caplog.at_level(logging.ERROR, logger=LOGGER_NAME):
        listeners.notify(EVENT)
    assert heard == [EVENT]
    (record,) = caplog.records
    assert record.name == LOGGER_NAME
    assert "seq=3 type='turn/start'" in record.getMessage()
    assert record.exc_info is not None
    assert isinstance(record.exc_info[1], RuntimeError)


def test_an_interrupt_is_not_swallowed() -> None:
    def interrupted(event: Any) -> None:
        raise KeyboardInterrupt

    listeners = Listeners()
    listeners.add(interrupted)
    with pytest.raises(KeyboardInterrupt):
        listeners.notify(EVENT)


def test_unsubscribing_stops_a_listener_and_is_safe_twice() -> None:
    heard: list[Any] = []
    listeners = Listeners()
    unsubscribe = listeners.add(heard.append)
    listeners.notify(EVENT)
    unsubscribe()
    unsubscribe()
    listeners.notify(EVENT)
    assert heard == [EVENT]
    assert listeners.callbacks == ()


def test_a_listener_subscribed_during_a_notification_hears_the_next_event() -> None:
    heard: list[str] = []
    listeners = Listeners()

    def subscribe_another(event: Any) -> None:
        heard.append("first")
        if len(heard) == 1:
            listeners.add(lambda event: heard.append("late"))

    listeners.add(subscribe_another)
    listeners.notify(EVENT)
    assert heard == ["first"]
    listeners.notify(EVENT)
    assert heard == ["first", "first", "late"]


def test_a_new_registry_shares_no_listener_with_another() -> None:
    first, second = Listeners(), Listeners()
    first.add(print)
    assert second.callbacks == ()
