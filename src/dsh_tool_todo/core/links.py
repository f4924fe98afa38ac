"""Sub-agent links: a session names the session it works for, once, at the head of its log.

A link is host metadata: the model never sees it, and no call of one agent
reads or writes another's list. The link is the event ``session/link`` with
data ``{"parent": "<parent session key>"}`` and, when the host knows which of
the parent's tool calls started the child, ``"parentCallId": "<call id>"``. A
store records it as the event at seq 0 of a new log (before any ``todo/write``
or ``turn/start``); the ``todos`` projection ignores it, so replay and resume
are unchanged. Readers take a session's parent from its head event.

Reopening a log under the same parent is a no-op (the link recorded first
stays, whatever call id is given this time). Reopening it under a different
parent, or naming a parent for a log that already holds events and no link, is
refused with :class:`~dsh_tool_todo.errors.LinkConflict` and nothing is
written: a log has one parent, the one it was started for.

>>> from dsh_tool_todo.stores.memory import MemorySession
>>> child = MemorySession(parent="planner", parent_call_id="call_7")
>>> child.events[0]
{'seq': 0, 'type': 'session/link', 'data': {'parent': 'planner', 'parentCallId': 'call_7'}}
>>> link_of(child.events[0])
Link(parent='planner', parent_call_id='call_7')
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import LinkConflict, UsageError
from .contract import LINK_EVENT_TYPE, SESSION_END_EVENT_TYPE

__all__ = [
    "End",
    "Link",
    "end_of",
    "link_of",
]

PARENT_KEY = "parent"
PARENT_CALL_ID_KEY = "parentCallId"
MAX_KEY_CHARS = 1024  # a key (or call id) names a session to a person: longer is a mistake


@dataclass(frozen=True)
class Link:
    """A session's parent, as its log records it."""

    parent: str
    parent_call_id: str | None = None


def link_data(parent: object, parent_call_id: object = None) -> dict[str, str]:
    """The data of the link event for ``parent``; :class:`UsageError` for a bad key or call id."""
    if not isinstance(parent, str) or not parent or len(parent) > MAX_KEY_CHARS:
        raise UsageError(
            f"parent must be the parent session's key, a non-empty string of at most "
            f"{MAX_KEY_CHARS} characters, not {_shown(parent)} (a store session's key is "
            "its .key: the JSONL file's name without .jsonl, the PostgreSQL session id)"
        )
    _check_text("parent", parent)
    data = {PARENT_KEY: parent}
    if parent_call_id is not None:
        if (
            not isinstance(parent_call_id, str)
            or not parent_call_id
            or len(parent_call_id) > MAX_KEY_CHARS
        ):
            raise UsageError(
                f"parent_call_id must be a non-empty string of at most {MAX_KEY_CHARS} "
                f"characters (the parent's tool-call id) or None, not {_shown(parent_call_id)}"
            )
        _check_text("parent_call_id", parent_call_id)
        data[PARENT_CALL_ID_KEY] = parent_call_id
    return data


def _check_text(name: str, value: str) -> None:
    """No key or call id holds NUL or a lone surrogate (no file name, no PostgreSQL text can),
    and PostgreSQL's summary trigger cannot read such a link back: refused before any I/O."""
    try:
        value.encode()
    except UnicodeEncodeError:
        raise UsageError(
            f"{name} must be valid Unicode text, not {_shown(value)} (it holds a lone surrogate)"
        ) from None
    if "\0" in value:
        raise UsageError(f"{name} must not hold NUL characters, not {_shown(value)}")


def link_of(event: Mapping[str, Any] | None) -> Link | None:
    """The link ``event`` records, or ``None`` when it is no well-formed link event.

    A malformed link (a parent that is not a non-empty string) names no parent:
    a viewer shows the session as a root rather than inventing one.
    """
    if event is None or event.get("type") != LINK_EVENT_TYPE:
        return None
    data = event.get("data")
    if not isinstance(data, Mapping):
        return None
    parent = data.get(PARENT_KEY)
    if not isinstance(parent, str) or not parent:
        return None
    call_id = data.get(PARENT_CALL_ID_KEY)
    return Link(parent, call_id if isinstance(call_id, str) and call_id else None)


def decide_link(
    where: str, head: Mapping[str, Any] | None, next_seq: int, data: Mapping[str, str]
) -> bool:
    """Whether a log whose next seq is ``next_seq`` and whose seq 0 is ``head`` needs the link.

    ``True``: the log is new, append the link now. ``False``: it records this
    parent already. Raises :class:`LinkConflict` (nothing is written) when it
    records another parent, or holds events and no link.
    """
    if next_seq == 0:
        return True
    recorded = link_of(head)
    if recorded is None:
        raise LinkConflict(
            f"{where}: the log already holds {next_seq} event{'s' if next_seq != 1 else ''} "
            f"and no link, so it cannot be linked to {data[PARENT_KEY]!r} (a link is recorded "
            "only at the head of a new log): open it without a parent, or start a new log"
        )
    if recorded.parent != data[PARENT_KEY]:
        raise LinkConflict(
            f"{where}: the log was started for parent {recorded.parent!r}, not "
            f"{data[PARENT_KEY]!r}: a log keeps the parent it was started for; open it "
            "without a parent, or start a new log for the new parent"
        )
    return False


OUTCOMES = ("finished", "failed")
OUTCOME_KEY = "outcome"
ERROR_KEY = "error"
MAX_ERROR_CHARS = 200  # a short reason for a person: the full one is in the framework's log


@dataclass(frozen=True)
class End:
    """How a delegated run's session ended, as its log records it: ``finished`` (the delegating
    call returned) or ``failed`` (it raised; ``error`` says why, shortly)."""

    outcome: str
    error: str | None = None

    def as_json(self) -> dict[str, str]:
        """The end as ``dsh-todo sessions --json`` and the web view's list give it.

        >>> End("failed", "search backend down").as_json()
        {'outcome': 'failed', 'error': 'search backend down'}
        >>> End("finished").as_json()
        {'outcome': 'finished'}
        """
        if self.error is None:
            return {"outcome": self.outcome}
        return {"outcome": self.outcome, "error": self.error}


def end_data(outcome: object, error: object = None) -> dict[str, str]:
    """The data of the ``session/end`` event a link wrapper appends to a sub-agent's session
    when the delegating call returns (``finished``) or raises (``failed``, with ``error``)."""
    if outcome not in OUTCOMES:
        raise UsageError(f"outcome must be one of {', '.join(OUTCOMES)}, not {_shown(outcome)}")
    data = {OUTCOME_KEY: str(outcome)}
    if error is not None:
        if not isinstance(error, str):
            raise UsageError(f"error must be a str or None, not {_shown(error)}")
        # stored as text anywhere: no lone surrogate, no NUL (neither fits PostgreSQL)
        text = error.encode("utf-8", "replace").decode().replace("\0", "?")
        data[ERROR_KEY] = text[:MAX_ERROR_CHARS]
    return data


def end_of(event: Mapping[str, Any] | None) -> End | None:
    """The end ``event`` records, or ``None`` when it is no well-formed ``session/end``."""
    if event is None or event.get("type") != SESSION_END_EVENT_TYPE:
        return None
    data = event.get("data")
    if not isinstance(data, Mapping) or data.get(OUTCOME_KEY) not in OUTCOMES:
        return None
    error = data.get(ERROR_KEY)
    return End(data[OUTCOME_KEY], error if isinstance(error, str) and error else None)


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
