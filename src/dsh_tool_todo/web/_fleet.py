"""The fleet in the web view: health signals per listed session, and a session's family.

Signals are read from a session's current turn (``fleet.turn_window``), which costs a read
of its log; a list of 10,000 sessions shows at most ``MAX_SESSIONS`` rows per request, so
only those rows are read, and each answer is kept per (name, seq of the newest plan event):
only a ``todo/write`` or ``turn/start`` can change a turn's signals, so a list asked for
again after one session wrote a plan reads that one session's log, and after any other
appends reads none. Except for a person's requests: a ``turn/end`` settles one still pending
``not_honoured``, and taking one appends no plan event. So a session whose last read found a
request pending is read again after any append, and any other after appends at most every
:data:`REFRESH` seconds (one may have been taken since).
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from ..core.health import turn_health
from ..core.links import link_of
from ..errors import InvalidLog, SessionNotFound
from ..plans.fleet import turn_asked, turn_window
from ..protocols import LogReader, SessionSummary

CACHED = 20_000  # answers kept: above a 10,000-session fleet, bounded all the same
AT_ONCE = 8  # logs read at once: a cold list of 200 rows is not 200 opens at once
BUDGET = 0.05  # seconds a list request waits for signals not yet known
REFRESH = 5.0  # seconds a row's signals are kept through appends that are no plan event


Stamp = tuple[Any, ...]


def stamp_of(row: SessionSummary) -> Stamp:
    """What a row's signals are kept by: the seq of its newest plan event and what the list
    shows of that plan (a reader that does not give that seq: its newest seq and last
    activity instead)."""
    if row.plan_seq is not None:
        return ("plan", row.plan_seq, row.progress, row.working_on)
    return ("any", row.last_seq, row.last_activity, row.progress)


class SignalCache:
    """Each listed session's health signals, by (name, :func:`stamp_of` its row).

    A request waits at most ``budget`` seconds for the rows not yet known: the
    others are answered ``None`` (not read yet) and read on in the background,
    and ``on_late`` is called with their names once known, so a list that rings
    asks again and finds them. A fresh server's first list is then not held up
    by reading every shown log back.
    """

    def __init__(
        self,
        reader: LogReader,
        *,
        size: int = CACHED,
        budget: float | None = BUDGET,
        on_late: Callable[[frozenset[str]], None] | None = None,
    ) -> None:
        self._reader = reader
        self._size = size
        self._budget = budget
        self._on_late = on_late
        # per session: its stamp, the newest seq it was read at, its signals, and until when
        # (monotonic) they stand through appends that are no plan event
        self._kept: OrderedDict[str, tuple[Stamp, int | None, list[dict[str, Any]], float]] = (
            OrderedDict()
        )
        self._reading: dict[tuple[str, Stamp], asyncio.Task[list[dict[str, Any]]]] = {}
        self._gate: asyncio.Semaphore | None = None

    def _known(self, row: SessionSummary, stamp: Stamp) -> list[dict[str, Any]] | None:
        """The signals kept for ``row``, if its stamp is the same and its log has not gone
        back (a log cut short or replaced by a shorter one may hold the same plan seq)."""
        kept = self._kept.get(row.name)
        if kept is None or kept[0] != stamp or row.last_seq is None:
            return None
        if kept[1] is not None and row.last_seq < kept[1]:
            return None
        if row.last_seq != kept[1] and time.monotonic() >= kept[3]:
            return None
        self._kept.move_to_end(row.name)
        return kept[2]

    async def signals(self, rows: list[SessionSummary]) -> list[list[dict[str, Any]] | None]:
        """The signals of each row, in order (an unreadable or vanished log has none;
        ``None``: still being read when the budget ran out)."""
        answers: list[list[dict[str, Any]] | None] = []
        waiting: dict[int, asyncio.Task[list[dict[str, Any]]]] = {}
        for position, row in enumerate(rows):
            stamp = stamp_of(row)
            known = self._known(row, stamp)
            if known is not None:
                answers.append(known)
            elif row.progress is None:  # an unreadable log: nothing to read signals from
                answers.append([])
            else:
                answers.append(None)
                waiting[position] = self._read(row.name, stamp, row.last_seq)
        if waiting:
            tasks = set(waiting.values())
            _, late = await asyncio.wait(tasks, timeout=self._budget)
            for position, task in waiting.items():
                if task.done() and not task.cancelled() and task.exception() is None:
                    answers[position] = task.result()
            if late and self._on_late is not None:
                names = frozenset(rows[p].name for p, task in waiting.items() if task in late)
                gathered = asyncio.gather(*late, return_exceptions=True)
                on_late = self._on_late
                gathered.add_done_callback(lambda _: on_late(names))
        return answers

    def _read(
        self, name: str, stamp: Stamp, last_seq: int | None
    ) -> asyncio.Task[list[dict[str, Any]]]:
        key = (name, stamp)
        task = self._reading.get(key)
        if task is None:
            task = asyncio.ensure_future(self._compute(name, stamp, last_seq))
            self._reading[key] = task
            task.add_done_callback(lambda _: self._reading.pop(key, None))
        return task

    async def _compute(self, name: str, stamp: Stamp, last_seq: int | None) -> list[dict[str, Any]]:
        if self._gate is None:
            self._gate = asyncio.Semaphore(AT_ONCE)
        async with self._gate:
            # A short log is read without leaving the loop (the JSONL reader's tail): yield
            # first, so the budget's timer runs between reads and a cold list is not held up.
            await asyncio.sleep(0)
            try:
                events, whole = await turn_window(self._reader, name, asked=True)
            except (InvalidLog, SessionNotFound, OSError):  # nothing kept for a log not read
                self._kept.pop(name, None)
                return []
        found = [signal.as_json() for signal in turn_health(events, partial=not whole)]
        pending = any(state["status"] == "pending" for state in turn_asked(events))
        self._kept[name] = (stamp, last_seq, found, 0.0 if pending else time.monotonic() + REFRESH)
        self._kept.move_to_end(name)
        while len(self._kept) > self._size:
            self._kept.popitem(last=False)
        return found

    async def aclose(self) -> None:
        """Stop the reads still under way (the server is stopping)."""
        tasks = list(self._reading.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


UNLISTED = 50  # parents outside a list that are looked up, per request


async def served(reader: LogReader, name: str) -> bool:
    """Whether ``reader`` serves a session ``name`` (its first event, or its snapshot if none)."""
    try:
        page = await reader.tail(name, before=1, limit=1)
        if not page.events:  # a database's tail of an unknown id is empty, not an error
            await reader.snapshot(name)
    except InvalidLog:
        return True  # served, though its log cannot be read
    except (SessionNotFound, ValueError):  # ValueError: a name this store cannot hold
        return False
    return True


async def unlisted_parents(reader: LogReader, rows: list[SessionSummary]) -> dict[str, bool]:
    """For each parent that no row is (at most ``UNLISTED``): whether the reader serves it."""
    names = {row.name for row in rows}
    missing = list(dict.fromkeys(row.parent for row in rows if row.parent is not None))
    missing = [parent for parent in missing if parent not in names][:UNLISTED]
    found = await asyncio.gather(*(served(reader, parent) for parent in missing))
    return dict(zip(missing, found, strict=True))


async def family(reader: LogReader, name: str, limit: int) -> dict[str, Any]:
    """``name``'s parent (from its head link) and the listed sessions linked under it.

    A parent this reader does not serve is named with ``parentVisible: false``;
    ``childrenComplete`` is false when the store holds more sessions than one list
    reads (``limit``), so children beyond it may be missing.
    """
    head = await reader.tail(name, before=1, limit=1)  # seq 0: where a link is recorded
    if not head.events:
        await reader.snapshot(name)  # an unknown session is a 404 in every store
    link = link_of(head.events[0]) if head.events and head.events[0].get("seq") == 0 else None
    parent = None if link is None else link.parent
    parent_visible = parent is not None and await served(reader, parent)
    rows, total = await reader.sessions("", limit)
    children = [row.name for row in rows if row.parent == name and row.name != name]
    return {
        "session": name,
        "parent": parent,
        "parentVisible": parent_visible,
        "children": children,
        "childrenComplete": total <= len(rows),
    }


__all__ = ["SignalCache", "family", "served", "unlisted_parents"]
