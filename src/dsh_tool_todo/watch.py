"""Follow a growing JSONL session log and yield its plan each time the plan changes."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

from .errors import InvalidLog
from .logread import current_plan, parse_event, split_tail
from .projection import Plan, TodosProjection


def follow_plan(path: Path, *, interval: float, sleep: Callable[[float], None]) -> Iterator[Plan]:
    """Yield the current plan, then each new one as events are appended, forever.

    Starts from the end of the file, so following a long log costs nothing up
    front; a line still being written waits for its newline.
    """
    unit = TodosProjection()
    with path.open("rb") as log:
        offset = split_tail(log, str(path))[0]  # a line being written is read when whole
    state = current_plan(path)
    yield unit.view(state)
    pending = b""
    while True:
        sleep(interval)
        with path.open("rb") as log:
            if log.seek(0, 2) < offset:  # replaced or cut short: start over
                offset, pending, state = 0, b"", unit.init
            log.seek(offset)
            chunk = log.read()
        offset += len(chunk)
        *lines, pending = (pending + chunk).split(b"\n")
        before = state
        for line in lines:
            event = parse_event(line)
            if event is None:
                raise InvalidLog(f"{path}: a new line is not a session event {{seq, type, data}}")
            state = unit.apply(state, event)
        if state is not before:
            yield unit.view(state)
