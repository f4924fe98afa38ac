"""Idempotent appends: a ``todo/write`` whose tool-call id the current turn already holds.

A durable-execution engine retries a step that did not finish, so a host may
append the same ``todo_write`` call twice. When the call carries the
framework's call id (``data["callId"]``), every store records it once per turn
(since the last ``turn/start``): the repeat records nothing and answers with the
first append's event, same seq. Only within a turn, because some providers
number calls ``call_0``, ``call_1``, ... afresh in every response.

A repeat with a different plan is no retry: it is refused, so that a plan the
tool reports as written is never silently dropped.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..contract import CALL_ID_KEY, EVENT_TYPE
from ..errors import UsageError
from ..listeners import Event


def call_id_of(kind: str, data: Mapping[str, Any]) -> str | None:
    """The call id an append of ``kind`` with ``data`` is keyed by, or ``None``.

    Raises :class:`UsageError` for a ``todo/write`` whose call id is not a
    non-empty string: every reader would refuse the log holding it.
    """
    if kind != EVENT_TYPE:
        return None
    try:
        call = data.get(CALL_ID_KEY)
    except AttributeError:  # not a mapping: a host's malformed write, recorded as it was given
        return None
    if type(call) is str and call:
        return call
    if call is None and CALL_ID_KEY not in data:
        return None
    raise UsageError(
        f"a {EVENT_TYPE} {CALL_ID_KEY} must be the tool call's id as a non-empty str, "
        f"not {call!r:.40}: nothing was recorded"
    )


def same_call(first: Event, data: Mapping[str, Any], where: str) -> Event:
    """``first``, the event recorded for this call id in this turn, if ``data`` repeats it.

    A different plan under the same id is refused: answering with ``first``
    would tell the model a plan was recorded that was not.
    """
    recorded = first["data"]
    if recorded is data or dict(recorded) == dict(data):
        return first
    raise call_conflict(where, data[CALL_ID_KEY], first["seq"])


def call_conflict(where: str, call: str, seq: object) -> UsageError:
    return UsageError(
        f"{where}: call id {call!r} was already recorded in this turn with another plan "
        f"(seq {seq}); a repeated call id must repeat its call (give each call its own id): "
        "nothing was recorded"
    )
