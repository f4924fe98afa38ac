"""What a stream of plans carries beside each plan: what a person asked (docs/requests.md).

The wire streams of the web view (AG-UI, the AI SDK) and the A2A forwarder send,
once they have seen a request, ``"requests": [...]`` beside ``todos`` in each plan
they send: :meth:`~._pending.PendingRequests.asked`, the one list every view of
"asked" shows. Until then they send the plan exactly as they always did. A request
event that changes the list has the stream send its plan again, as it is, with the
new list; one that changes nothing sends nothing.

>>> asked = AskedBeside()
>>> asked.shown() is None  # no request seen: the plan goes as it always did
True
>>> taken = {"id": "r1", "kind": "add", "content": "Ship it", "by": "ada", "planSeq": -1, "at": 0}
>>> asked.add({"seq": 0, "type": "request/taken", "data": taken})
True
>>> [(r["content"], r["status"]) for r in asked.shown()]
[('Ship it', 'pending')]
>>> asked.add({"seq": 1, "type": "message/assistant", "data": {}})  # the list is as sent
False
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..core.contract import REQUEST_EVENT_TYPES
from ._pending import PendingRequests

__all__: list[str] = []


class AskedBeside:
    """What one stream shows beside its plan, from the log's events handed in order."""

    def __init__(self) -> None:
        self._requests = PendingRequests()
        self._seen = False  # a request seen: from then on every plan sent says what was asked
        self._shown: list[dict[str, Any]] | None = None  # the list last sent

    def prime(self, events: Iterable[Mapping[str, Any]]) -> None:
        """Start again from ``events``, a log's
        :func:`~dsh_tool_todo.core.requests.recent_events` up to the snapshot a stream
        (re)starts from. A stream that has seen a request goes on sending the list, so a
        client's copy is emptied when the log read anew has none."""
        self._requests = PendingRequests()
        for event in events:
            self._fold(event)

    def add(self, event: Mapping[str, Any]) -> bool:
        """Fold ``event`` in; whether the list differs from the one last sent (a stream
        that sends no plan for ``event`` then sends its plan again)."""
        self._fold(event)
        return self.changed()

    def changed(self) -> bool:
        """Whether the list differs from the one last sent, once a request was seen."""
        return self._seen and self._requests.asked() != self._shown

    def shown(self) -> list[dict[str, Any]] | None:
        """The list to send beside the plan now, noted as sent; ``None`` until a request
        was seen (the plan goes without the key)."""
        if not self._seen:
            return None
        self._shown = self._requests.asked()
        return self._shown

    def _fold(self, event: Mapping[str, Any]) -> None:
        self._requests.add(event)
        self._seen = self._seen or event.get("type") in REQUEST_EVENT_TYPES
