"""The fleet: every session of a store as a tree of sub-agents, with progress and health.

:func:`read_fleet` reads it through any :class:`~dsh_tool_todo.protocols.LogReader`
(``stores.open_reader``): each session is placed under the session its link
names (:mod:`dsh_tool_todo.core.links`); a parent the reader cannot see (another
directory, another database, deleted) becomes a node of its own marked not
visible, with its children under it, never an error. A session in a link
cycle (a hostile log can name any parent) is shown as a root, and so is one
more than :data:`MAX_DEPTH` levels down a chain of links (the text and the
JSON stay printable however long the chain). Each node
carries its progress, the item in progress, the health signals of its
current turn (:mod:`dsh_tool_todo.core.health`), what a person asked of it in that
turn (:meth:`~dsh_tool_todo.plans._pending.PendingRequests.asked`), and how its delegated run
ended when its log says so (``session/end``, :func:`~dsh_tool_todo.core.links.end_of`:
the newest of its plan events and ends is an end; a write after an end is a
run started again). :func:`render_tree` is what
``dsh-todo sessions SOURCE`` prints, every name and content escaped;
:func:`fleet_json` is its ``--json``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator, Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Protocol, cast, get_args

from ..core.contract import EVENT_TYPE, REQUEST_TAKEN, SESSION_END_EVENT_TYPE, TURN_START
from ..core.health import HealthOptions, Signal, turn_health
from ..core.links import End, end_of
from ..core.projection import PLAN_EVENTS
from ..core.requests import SETTLING_TYPES, Status
from ..errors import InvalidLog, SessionNotFound
from ..protocols import LogReader, Progress, SessionSummary, TailPage
from ._pending import PendingRequests
from .checklist import escape_content

__all__ = [
    "FleetNode",
    "fleet_json",
    "read_fleet",
    "render_tree",
]

MAX_TURN_WRITES = 1000
"""How many of a turn's latest writes the signals are computed from (a bound on one read)."""
PAGE = 200
MAX_DEPTH = 100
"""The deepest level a session is drawn at; one linked further down starts a tree of its own
(marked ``deep``): a chain of thousands of sub-agents still prints, as text and as JSON."""


@dataclass
class FleetNode:
    """One session (or a parent no one here can see) and the sessions linked under it."""

    key: str
    visible: bool = True
    parent: str | None = None
    last_activity: float | None = None
    progress: Progress | None = None
    in_progress: tuple[str, ...] = ()
    signals: tuple[Signal, ...] = ()
    readable: bool = True
    cycle: bool = False
    deep: bool = False
    end: End | None = None
    asked: tuple[dict[str, Any], ...] = ()  # each a RequestState.as_json(), oldest taken first
    children: list[FleetNode] = field(default_factory=list)


async def read_fleet(
    reader: LogReader, *, options: HealthOptions | None = None, limit: int = 1_000_000
) -> list[FleetNode]:
    """The roots of the store's tree, newest activity first (children likewise).

    A reader that hands its rows on one at a time with each log's first tail page
    (``sessions_paged``, the JSONL reader's) is read that way: one read of a short log,
    and only the tree's nodes kept.
    """
    nodes = []
    options = options or HealthOptions()  # once, not once per session
    shared = _Shared()
    if getattr(reader, "sessions_paged", None) is not None:
        async for row, first in cast(_Paged, reader).sessions_paged(
            "", limit, types=_READ, page=PAGE
        ):
            if isinstance(first, TailPage) and not first.more:  # the whole turn is in hand
                node = _filled(_bare(row), _last_turns(first.events, 2), True, options)
            else:
                node = await _node(reader, row, options, first)
            nodes.append(shared(node))
        return build_tree(nodes)
    rows, _ = await reader.sessions("", limit)
    for row in rows:
        nodes.append(shared(await _node(reader, row, options)))
    return build_tree(nodes)


class _Shared(dict[object, Any]):
    """One object for each value of a node's figures and end (frozen, so shared safely): a
    fleet of 100,000 sessions has a few dozen of them, not 100,000 copies held to the end."""

    def __call__(self, node: FleetNode) -> FleetNode:
        node.progress = self.setdefault(node.progress, node.progress)
        node.end = self.setdefault(node.end, node.end)
        return node


class _Paged(Protocol):
    def sessions_paged(
        self, query: str, limit: int, *, types: Collection[str], page: int
    ) -> AsyncIterator[tuple[SessionSummary, TailPage | InvalidLog | None]]: ...


async def _node(
    reader: LogReader,
    row: SessionSummary,
    options: HealthOptions | None,
    first: TailPage | InvalidLog | None = None,
) -> FleetNode:
    node = _bare(row)
    if isinstance(first, InvalidLog):  # the list's read of the log found it broken
        node.readable = False
        return node
    try:
        # the ends and the requests ride on the read the signals need: no second read of the log
        events, whole = await _turn(reader, row.name, _READ, first, starts=2)
    except (InvalidLog, SessionNotFound, OSError):  # broken, unreadable, or deleted since listed
        node.readable = False
        return node
    return _filled(node, events, whole, options)


def _bare(row: SessionSummary) -> FleetNode:
    return FleetNode(
        row.name,
        parent=row.parent,
        last_activity=row.last_activity,
        progress=row.progress,
        readable=row.progress is not None,
    )


def _last_turns(events: list[dict[str, Any]], starts: int) -> list[dict[str, Any]]:
    """What :func:`_turn` finds in a last page: its events from the ``starts``-th last
    ``turn/start`` on."""
    for position in range(len(events) - 1, -1, -1):
        if events[position]["type"] == TURN_START:
            starts -= 1
            if not starts:
                return events[position:]
    return events


def _filled(
    node: FleetNode, events: list[dict[str, Any]], whole: bool, options: HealthOptions | None
) -> FleetNode:
    """``node`` with what its current turn's events say: those of :data:`_READ`, from the
    ``turn/start`` before it on."""
    plans = [event for event in events if event["type"] in _PLANS_AND_ENDS]
    node.end = end_of(plans[-1]) if plans else None
    writes = [event for event in plans if event["type"] != SESSION_END_EVENT_TYPE]
    if writes and writes[-1]["type"] == EVENT_TYPE:
        node.in_progress = tuple(
            str(item.get("content"))
            for item in writes[-1]["data"]["todos"]
            if item.get("status") == "in_progress"
        )
    if any(event["type"] == REQUEST_TAKEN for event in events):
        node.asked = tuple(turn_asked(events))
        writes = [event for event in events if event["type"] != SESSION_END_EVENT_TYPE]
    else:  # nothing was asked: the plan events alone, and only the turn's, fold fastest
        writes = _last_turns(writes, 1)
    node.signals = tuple(turn_health(writes, options, partial=not whole))
    return node


class _Tail(Protocol):
    async def tail(
        self, name: str, *, before: int | None, limit: int, types: Collection[str] | None = None
    ) -> TailPage: ...


async def turn_events(reader: _Tail, name: str) -> list[dict[str, Any]]:
    """The current turn's ``todo/write`` events and its ``turn/start``, oldest first: at most
    :data:`MAX_TURN_WRITES`, read back from the end through ``reader.tail``."""
    return (await _turn(reader, name))[0]


async def turn_window(
    reader: _Tail, name: str, *, asked: bool = False
) -> tuple[list[dict[str, Any]], bool]:
    """:func:`turn_events`, and whether they begin where the turn does (``False``: the turn
    is longer than :data:`MAX_TURN_WRITES`, and these are its latest writes; fold them
    with ``turn_health(..., partial=True)``).

    ``asked``: also the events that settle a person's requests
    (:data:`~dsh_tool_todo.core.requests.SETTLING_TYPES`), back to the ``turn/start`` before
    the current one (a request the turn before took may still be pending): what
    ``turn_health`` needs for ``not_honoured``, and :func:`turn_asked` for what was asked
    (the same read ``dsh-todo sessions`` makes of each log)."""
    if asked:
        return await _turn(reader, name, SETTLING_TYPES, starts=2)
    return await _turn(reader, name)


def turn_asked(events: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """What was asked in the current turn of ``events`` (``turn_window(..., asked=True)``),
    each as :meth:`~dsh_tool_todo.core.requests.RequestState.as_json`: what
    :meth:`~dsh_tool_todo.plans._pending.PendingRequests.asked` answers, the list every view
    shows beside the plan."""
    pending = PendingRequests()
    for event in events:
        pending.add(event)
    return pending.asked()


_PLANS_AND_ENDS = frozenset({*PLAN_EVENTS, SESSION_END_EVENT_TYPE})
_READ = frozenset({*SETTLING_TYPES, SESSION_END_EVENT_TYPE})
"""What the fleet reads of each log: the plan events, the ends, and the requests' events."""


async def _turn(
    reader: _Tail,
    name: str,
    types: Collection[str] = PLAN_EVENTS,
    first: TailPage | None = None,
    *,
    starts: int = 1,
) -> tuple[list[dict[str, Any]], bool]:
    """The current turn's events of ``types``, back to its ``turn/start`` (``starts=2``: to
    the one before it), at most MAX_TURN_WRITES, and whether the current turn's start lies
    within them (``first``: the first page, when the list's read of the log held it)."""
    found: list[dict[str, Any]] = []
    before: int | None = None
    seen = 0
    while len(found) < MAX_TURN_WRITES:
        if first is not None:
            page, first = first, None
        else:
            page = await reader.tail(name, before=before, limit=PAGE, types=types)
        for position in range(len(page.events) - 1, -1, -1):
            event = page.events[position]
            found.append(event)
            if event["type"] == TURN_START:
                seen += 1
                if seen == starts:
                    return found[::-1], True
        if not page.more or page.cursor is None:
            return found[::-1], True
        before = page.cursor
    return found[::-1], seen > 0


def build_tree(nodes: Sequence[FleetNode]) -> list[FleetNode]:
    """Place each node under its parent, in the given order; unseen parents become nodes."""
    by_key = {node.key: node for node in nodes}
    on_cycles = _on_cycles(nodes, by_key)
    roots: list[FleetNode] = []
    unseen: dict[str, FleetNode] = {}
    for node in nodes:
        node.children = []
        node.deep = False
    for node in nodes:
        if node.parent is None:
            roots.append(node)
        elif node.parent in by_key:
            if node.key in on_cycles:
                node.cycle = True
                roots.append(node)
            else:
                by_key[node.parent].children.append(node)
        else:
            holder = unseen.get(node.parent)
            if holder is None:
                holder = unseen[node.parent] = FleetNode(node.parent, visible=False)
                roots.append(holder)
            holder.children.append(node)
    # a chain deeper than MAX_DEPTH goes on as a root of its own: every walk of the tree
    # (the text, the JSON, json.dumps) then stays far from the interpreter's recursion limit
    level = deque((root, 0) for root in roots)  # only the levels not walked yet are held
    while level:
        node, depth = level.popleft()
        if depth == MAX_DEPTH:
            for child in node.children:
                child.deep = True
                roots.append(child)
                level.append((child, 0))
            node.children = []
        else:
            level.extend((child, depth + 1) for child in node.children)
    return roots


def _on_cycles(nodes: Sequence[FleetNode], by_key: Mapping[str, FleetNode]) -> set[str]:
    """The keys of the sessions whose parents lead back to themselves, in one pass over the
    links (following each chain anew from every node took seconds for a chain of thousands).
    Each session of a cycle becomes a root; one that only hangs off a cycle keeps its parent."""
    done: set[str] = set()
    found: set[str] = set()
    for node in nodes:
        if node.parent is None:  # a root is on no cycle, and a walk reaching it ends there:
            continue  # no need to remember it (most of a fleet, 100,000s of keys)
        path: list[str] = []
        on_path: set[str] = set()
        key: str | None = node.key
        while key is not None and key in by_key and key not in done and key not in on_path:
            path.append(key)
            on_path.add(key)
            key = by_key[key].parent
        if key is not None and key in on_path:  # came back into this walk: a cycle
            found.update(path[path.index(key) :])
        done.update(path)
    return found


def render_tree(roots: Sequence[FleetNode], *, encoding: str | None = None) -> str:
    """The tree as text: one line per node, indented two spaces per level, fields by tab."""
    lines: list[str] = []

    def shown(text: str) -> str:
        return escape_content(text, encoding=encoding)

    def walk(node: FleetNode, depth: int) -> None:
        indent = "  " * depth
        if not node.visible:
            lines.append(f"{indent}{shown(node.key)}\t(parent not visible here)")
        else:
            fields = [f"{indent}{shown(node.key)}", _progress_text(node)]
            if node.end is not None:
                fields.append(_end_text(node.end, shown))
            if node.last_activity is not None:
                fields.append("last " + _when(node.last_activity))
            if node.in_progress:
                fields.append("now: " + ", ".join(f'"{shown(c)}"' for c in node.in_progress))
            if node.asked:
                fields.append(_asked_text(node.asked))
            if node.signals:
                fields.append("! " + ", ".join(_signal_text(s) for s in node.signals))
            if node.cycle:
                fields.append(f"(its link to {shown(node.parent or '')} makes a cycle)")
            if node.deep:
                fields.append(
                    f"(under {shown(node.parent or '')}, more than {MAX_DEPTH} levels down)"
                )
            lines.append("\t".join(fields))
        for child in node.children:
            walk(child, depth + 1)

    for root in roots:
        walk(root, 0)
    return "\n".join(lines)


def _progress_text(node: FleetNode) -> str:
    progress = node.progress
    if not node.readable or progress is None:
        return "unreadable"
    if progress.cleared:
        return "no plan"
    return f"{progress.completed}/{progress.total} done"


def _end_text(end: End, shown: Callable[[str], str]) -> str:
    if end.error is None:
        return end.outcome
    return f"{end.outcome}: {shown(end.error)}"


def _asked_text(asked: Sequence[Mapping[str, Any]]) -> str:
    """``asked: 1 pending, 1 honoured``: how many requests of the turn stand each way."""
    counts = [(sum(r["status"] == status for r in asked), status) for status in _STATUSES]
    return "asked: " + ", ".join(f"{count} {status}" for count, status in counts if count)


_STATUSES: tuple[Status, ...] = get_args(Status)


def _signal_text(signal: Signal) -> str:
    return f"{signal.kind}@{signal.seq}"


def _when(stamp: float) -> str:
    return datetime.fromtimestamp(stamp, timezone.utc).isoformat(timespec="seconds")


def fleet_json(roots: Sequence[FleetNode]) -> list[dict[str, Any]]:
    """The tree as JSON values (``--json``): names and contents as they are, unescaped."""

    def node_json(node: FleetNode) -> dict[str, Any]:
        progress = node.progress
        return {
            "key": node.key,
            "visible": node.visible,
            "parent": node.parent,
            "lastActivity": node.last_activity,
            "readable": node.readable if node.visible else None,
            "progress": None if progress is None else progress.as_json(),
            "inProgress": list(node.in_progress),
            "signals": [signal.as_json() for signal in node.signals],
            "cycle": node.cycle,
            "deep": node.deep,
            "end": _end_json(node.end),
            "asked": list(node.asked),
            "children": [node_json(child) for child in node.children],
        }

    return [node_json(root) for root in roots]


def _end_json(end: End | None) -> dict[str, str] | None:
    return None if end is None else end.as_json()


def descendants(rows: Sequence[SessionSummary], name: str) -> list[tuple[str, str]]:
    """The sessions under ``name`` in the tree ``rows`` make, as (session, its parent), each
    after its parent: the tree :func:`read_fleet` draws (its cycles and depth bound too),
    from the rows' links alone, with no log read. A ``name`` no row is (a lead whose log
    is in another store) has the sessions :func:`read_fleet` draws under it, marked not
    visible."""
    nodes = [FleetNode(row.name, parent=row.parent) for row in rows]
    roots = build_tree(nodes)
    top = next((node for node in nodes if node.key == name), None)
    if top is None:
        top = next((root for root in roots if not root.visible and root.key == name), None)
    found: list[tuple[str, str]] = []
    level = [] if top is None else [top]
    while level:
        node = level.pop(0)
        for child in node.children:
            found.append((child.key, node.key))
            level.append(child)
    return found
