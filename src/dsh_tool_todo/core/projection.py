"""The ``todos`` session projection: the current plan, and a replay of a whole log."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..errors import InvalidLog, ToolCallRejected
from ..protocols import Event, PluginContext, Progress
from ._accept import accepts_logged
from ._validation import validate_call
from .contract import CALL_ID_KEY, EVENT_TYPE, TURN_START
from .model import TodoItem

__all__ = [
    "PLAN_EVENTS",
    "Plan",
    "TodosProjection",
    "replay",
]

PROJECTION_KEY = "todos"
Plan = list[TodoItem] | None
PLAN_EVENTS: tuple[str, ...] = (EVENT_TYPE, TURN_START)
"""The event types that each decide the whole plan: the newest of them gives it."""


class TodosProjection:
    """The current plan: the latest ``todo/write``'s list, cleared by each ``turn/start``.

    Every other event (``turn/end`` included) returns the same state object, so a
    host can tell by identity that nothing changed. ``apply`` trusts the event
    (the tool only appends lists it has checked; the fold must stay cheap), so a
    malformed ``todo/write`` appended by a host raises here or is held as is;
    ``resume`` and :func:`replay` check what they read.

    It is a :class:`~dsh_tool_todo.protocols.ResumableUnit`: the latest
    ``todo/write`` or ``turn/start`` alone fixes the whole state, so a host
    opening an agent on an existing log starts from ``resume(latest)``.
    """

    state_version = 2
    init: Plan = None
    resume_from: tuple[str, ...] = PLAN_EVENTS

    def resume(self, event: Mapping[str, Any] | None) -> Plan:
        """The state after ``event``, the newest of ``resume_from`` in a log (``None``: none).

        Raises :class:`InvalidLog` naming the event when it is a ``todo/write``
        the tool could not have written.
        """
        if event is None:
            return self.init
        kind = event.get("type")
        if kind == TURN_START:
            return None
        if kind != EVENT_TYPE:
            raise InvalidLog(f"cannot resume the todos projection from a {kind!r} event")
        check_logged_write(event, event.get("seq", "?"))
        todos: list[TodoItem] = event["data"]["todos"]
        return todos

    def apply(self, state: Plan, event: Mapping[str, Any]) -> Plan:
        kind = event["type"]
        if kind == EVENT_TYPE:
            todos: list[TodoItem] = event["data"]["todos"]
            return todos
        if kind == TURN_START:
            return None
        return state

    def view(self, state: Plan) -> Plan:
        return state


_UNIT = TodosProjection()


def register_projection(ctx: PluginContext) -> None:
    """Register the unit when the host mounts a projection registry; else do nothing."""
    registry = getattr(ctx, "session_projections", None)
    if registry is not None:
        registry.register(PROJECTION_KEY, TodosProjection())


def replay(events: Iterable[Mapping[str, Any]], *, verify: bool = True) -> Plan:
    """Fold a whole session log into its current plan (last write wins).

    With ``verify``, each ``todo/write`` must hold a list the tool could have
    written: raises :class:`InvalidLog` otherwise. The check allows any number of
    ``in_progress`` items, so a log written while parallel work was allowed still
    replays after a deployment tightens the option.

    Without ``verify``, a sequence (a list, a tuple) is read from its end and
    only back to its latest ``todo/write`` or ``turn/start``: nothing before
    either can change the answer, so the cost is that of the tail, whatever
    the log's length. A one-shot iterator is read whole, as is every log
    being verified.
    """
    if not verify:
        if isinstance(events, Sequence):
            return _plan_from_end(events)
        return _fold(events)
    unit = TodosProjection()
    state = unit.init
    for position, event in enumerate(events):
        if event["type"] == EVENT_TYPE:
            check_logged_write(event, position)
        state = unit.apply(state, event)
    return unit.view(state)


def _fold(events: Iterable[Mapping[str, Any]]) -> Plan:
    """:class:`TodosProjection`'s fold written out, without a method call per event."""
    plan: Plan = TodosProjection.init
    for event in events:
        kind = event["type"]
        if kind == EVENT_TYPE:
            plan = event["data"]["todos"]
        elif kind == TURN_START:
            plan = None
    return plan


def _plan_from_end(events: Sequence[Mapping[str, Any]]) -> Plan:
    """What :class:`TodosProjection` folds ``events`` into, read backwards to the deciding event."""
    for position in range(len(events) - 1, -1, -1):
        event = events[position]
        if event["type"] in PLAN_EVENTS:  # the last write or turn start decides alone
            return _UNIT.apply(None, event)
    return TodosProjection.init


_WITH_CALL_ID = frozenset(("todos", CALL_ID_KEY))


def _call_id_ok(data: Mapping[str, Any]) -> bool:
    call_id = data[CALL_ID_KEY]
    return type(call_id) is str and call_id != ""


def check_logged_write(event: Mapping[str, Any], position: object) -> None:
    data = event.get("data")
    if type(data) is dict and len(data) == 1 and accepts_logged(data.get("todos")):
        return  # the usual write, decided without the checks below (a viewer reads thousands)
    if not isinstance(data, Mapping) or not (
        set(data) == {"todos"} or (set(data) == _WITH_CALL_ID and _call_id_ok(data))
    ):
        raise InvalidLog(
            f"event {position}: {EVENT_TYPE} data must be {{todos: [...]}} "
            f"(optionally with a non-empty string {CALL_ID_KEY})"
        )
    if accepts_logged(data["todos"]):
        return
    try:
        validate_call(data if len(data) == 1 else {"todos": data["todos"]}, allow_parallel=True)
    except ToolCallRejected as rejected:
        raise InvalidLog(f"event {position}: {rejected}") from None


def checked_deciding(event: Event, where: str) -> Event:
    """``event`` if it is a ``todo/write`` the tool could have written (or another event).

    Every reader checks a deciding event it returns here, so a log a host
    broke is reported the same way by every store: :class:`InvalidLog`
    naming ``where``.
    """
    if event["type"] == EVENT_TYPE:
        try:
            check_logged_write(event, event["seq"])
        except InvalidLog as error:
            raise InvalidLog(f"{where}: {error}") from None
    return event


def progress_of(deciding: Mapping[str, Any] | None) -> Progress:
    """The figures of the plan a deciding event leaves (``None``: a cleared or empty plan)."""
    if deciding is None or deciding["type"] != EVENT_TYPE:
        return Progress(0, 0, 0, cleared=True)
    todos: Sequence[Mapping[str, Any]] = deciding["data"]["todos"]
    completed = sum(1 for todo in todos if todo["status"] == "completed")
    active = sum(1 for todo in todos if todo["status"] == "in_progress")
    return Progress(completed, len(todos), active, cleared=False)
