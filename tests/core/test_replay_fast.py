"""``replay`` of a sequence without verification reads from the end: same answer as the fold."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_tool_todo import InvalidLog, TodosProjection, replay
from dsh_tool_todo.core.contract import EVENT_TYPE, TURN_START
from tests._builders import make_event, todo, todo_write, turn_start

Event = dict[str, Any]
TURN_END = make_event("turn/end")


def full_fold(events: Sequence[Mapping[str, Any]]) -> object:
    """The projection unit applied to every event in order: what a host's projection holds."""
    unit = TodosProjection()
    state = unit.init
    for event in events:
        state = unit.apply(state, event)
    return unit.view(state)


# Types the fold must tell apart from the two that matter, near misses included.
_TYPES = st.sampled_from(
    [
        EVENT_TYPE,
        TURN_START,
        "turn/end",
        "todo/write ",
        "Todo/write",
        "todo\\/write",
        "turn/start\0",
    ]
) | st.text(max_size=12)
_TODOS = st.lists(
    st.fixed_dictionaries(
        {"content": st.text(max_size=8), "status": st.sampled_from(["pending", "in_progress"])}
    ),
    max_size=3,
)


@st.composite
def events(draw: st.DrawFn) -> Event:
    kind = draw(_TYPES)
    # Any data: the unverified fold never checks it, and only reads a write's list.
    data = (
        {"todos": draw(_TODOS)}
        if kind == EVENT_TYPE
        else draw(st.dictionaries(st.text(), st.integers(), max_size=2))
    )
    return {"seq": draw(st.integers(0, 10**6)), "type": kind, "data": data}


@settings(max_examples=500, deadline=None)
@given(st.lists(events(), max_size=40))
def test_reading_from_the_end_agrees_with_the_fold(log: list[Event]) -> None:
    expected = full_fold(log)
    fast = replay(log, verify=False)
    assert fast == expected
    # the very object the fold keeps, not an equal copy
    assert fast is expected
    assert replay(tuple(log), verify=False) is expected
    assert replay(iter(log), verify=False) is expected  # the whole fold, written out


def test_reading_from_the_end_stops_at_the_deciding_make_event() -> None:
    class Counting(Sequence[Event]):
        """A sequence that records which positions were read."""

        def __init__(self, items: list[Event]) -> None:
            self.items = items
            self.read: list[int] = []

        def __len__(self) -> int:
            return len(self.items)

        def __getitem__(self, index: Any) -> Any:
            self.read.append(index)
            return self.items[index]

    plan = [todo("a")]
    log = Counting(
        [todo_write(todo("old"))] * 1000
        + [make_event(EVENT_TYPE, {"todos": plan})]
        + [TURN_END] * 3
    )
    assert replay(log, verify=False) is plan
    assert log.read == [1003, 1002, 1001, 1000]

    cleared = Counting([make_event(EVENT_TYPE, {"todos": plan}), turn_start()])
    assert replay(cleared, verify=False) is None
    assert cleared.read == [1]
    assert replay(Counting([]), verify=False) is None


def test_an_iterator_is_read_whole() -> None:
    seen: list[int] = []
    plan = [todo("b", "completed")]

    def generate() -> Iterator[Event]:
        for index in range(5):
            seen.append(index)
            yield make_event(EVENT_TYPE if index == 2 else "turn/end", {"todos": plan})

    assert replay(generate(), verify=False) is plan
    assert seen == [0, 1, 2, 3, 4]


def test_verifying_replay_still_reads_every_make_event() -> None:
    bad, good = todo_write(todo("")), todo_write(todo("x"))
    log = [bad, good]
    assert replay(log, verify=False) == good["data"]["todos"]  # the end decides
    with pytest.raises(InvalidLog, match=r"^event 0: "):
        replay(log)  # verify=True looks at the write the end made irrelevant
