"""Idempotent appends: a ``todo/write`` that repeats an earlier call of the current turn.

A durable-execution engine retries a step that did not finish, so a host may
append the same ``todo_write`` call twice. When the call carries the
framework's call id (``data["callId"]``), a ``todo/write`` whose call id AND
list equal an earlier ``todo/write`` of the current turn (since the last
``turn/start``) is a retry: it records nothing and answers with that earlier
event, same seq.

The same call id with a different list is a new call, recorded as usual: some
providers number calls ``call_0``, ``call_1``, ... afresh in every model
response, so within one turn an id legitimately comes back with a new plan,
and refusing it would lose a plan the model was told is written. The one
ambiguity: a provider that reuses ids AND sends an earlier list again under
the same id within one turn is taken as a retry, and the model is then told
something false: ``c0`` with list A, ``c1`` with B, then ``c0`` with A again are
all answered as written, but the third records nothing and the plan stays B.
No store can tell that call from a recovery replaying the first (recording it
would make every recovery set the plan back), so a host whose provider reuses
ids within a turn should make them unique per turn.

Every store keys the turn's calls by :func:`call_key`, a digest of the id and
the data, so "the same call" means the same thing in memory, in a JSONL file
and in PostgreSQL's unique index.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from ..core.contract import CALL_ID_KEY, EVENT_TYPE
from ..errors import UsageError


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


def call_key(data: Mapping[str, Any]) -> bytes:
    """The SHA-256 of a keyed ``todo/write``'s data (its call id included), canonical JSON.

    Canonical (sorted keys, ASCII escapes) so that the data a host passes and the
    same data read back from a log give one key, whatever the key order, tuples
    or lone surrogates; a fixed-size digest keys PostgreSQL's index entry.
    A value JSON cannot hold is keyed by its ``repr``: at worst a retry of it is
    recorded again, never a new plan dropped.
    """
    try:
        text = json.dumps(data, sort_keys=True, separators=(",", ":"), default=repr)
    except TypeError:  # keys of mixed types cannot be sorted
        text = json.dumps(data, separators=(",", ":"), default=repr)
    return hashlib.sha256(text.encode("ascii")).digest()
