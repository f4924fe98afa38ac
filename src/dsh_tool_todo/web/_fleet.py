"""The fleet in the web view: health signals per listed session, and a session's family.

Signals are read from a session's current turn (``fleet.turn_events``), which costs a read
of its log; a list of 10,000 sessions shows at most ``MAX_SESSIONS`` rows per request, so
only those rows are read, and each answer is kept per (name, last seq): a list asked for
again after one session changed reads that one session's log, not every shown row's.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from typing import Any

from ..errors import InvalidLog, SessionNotFound
from ..fleet import turn_events
from ..health import turn_health
from ..links import link_of
from ..protocols import LogReader, SessionSummary

CACHED = 20_000  # answers kept: above a 10,000-session fleet, bounded all the same
AT_ONCE = 8  # logs read at once for one list: a cold list of 200 rows is not 200 opens at once


class SignalCache:
    """Each listed session's health signals, by (name, last seq, last activity)."""

    def __init__(self, reader: LogReader, size: int = CACHED) -> None:
        self._reader = reader
        self._size = size
        self._kept: OrderedDict[str, tuple[tuple[Any, ...], list[dict[str, Any]]]] = OrderedDict()

    async def signals(self, rows: list[SessionSummary]) -> list[list[dict[str, Any]]]:
        """The signals of each row, in order (an unreadable or vanished log has none)."""
        gate = asyncio.Semaphore(AT_ONCE)

        async def one(row: SessionSummary) -> list[dict[str, Any]]:
            stamp = (row.last_seq, row.last_activity, row.progress)
            kept = self._kept.get(row.name)
            if kept is not None and kept[0] == stamp and row.last_seq is not None:
                self._kept.move_to_end(row.name)
                return kept[1]
            if row.progress is None:  # an unreadable log: nothing to read signals from
                return []
            async with gate:
                try:
                    events = await turn_events(self._reader, row.name)
                except (InvalidLog, SessionNotFound):
                    return []
            found = [signal.as_json() for signal in turn_health(events)]
            self._kept[row.name] = (stamp, found)
            self._kept.move_to_end(row.name)
            while len(self._kept) > self._size:
                self._kept.popitem(last=False)
            return found

        return list(await asyncio.gather(*(one(row) for row in rows)))


UNLISTED = 50  # parents outside a list that are looked up, per request


async def served(reader: LogReader, name: str) -> bool:
    """Whether ``reader`` serves a session ``name`` (one read of its first event at most)."""
    try:
        await reader.tail(name, before=1, limit=1)
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
