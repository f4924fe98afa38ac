"""Follow a growing JSONL session log and yield its plan each time the plan changes."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

from .errors import InvalidLog
from .projection import Plan, TodosProjection
from .sessionlog import current_plan


def follow_plan(path: Path, *, interval: float, sleep: Callable[[float], None]) -> Iterator[Plan]:
    """Yield the current plan, then each new one as events are appended, forever.

    Starts from the end of the file, so following a long log costs nothing up
    front; a line still being written waits for its newline.
    """
    unit = TodosProjection()
    offset = path.stat().st_size
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
        for number, line in enumerate(lines, start=1):
            if line.strip():
                state = unit.apply(state, _event(line, path, number))
        if state is not before:
            yield unit.view(state)


def _event(line: bytes, path: Path, number: int) -> dict[str, object]:
    try:
        event = json.loads(line)
    except ValueError:
        raise InvalidLog(f"{path}: new line {number} is not JSON") from None
    if not isinstance(event, dict) or "type" not in event:
        raise InvalidLog(f"{path}: new line {number} is not a session event")
    return event
