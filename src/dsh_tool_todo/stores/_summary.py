"""What a session list shows of a plan beside its figures, shared by every store's reader."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..core.contract import EVENT_TYPE

__all__ = ["working_on"]


def working_on(deciding: Mapping[str, Any] | None) -> str | None:
    """The content of the first ``in_progress`` item of the plan a deciding event leaves.

    >>> working_on({"type": "todo/write", "data": {"todos": [
    ...     {"content": "a", "status": "completed"}, {"content": "b", "status": "in_progress"}]}})
    'b'
    """
    if deciding is None or deciding["type"] != EVENT_TYPE:
        return None
    for todo in deciding["data"]["todos"]:
        if todo["status"] == "in_progress":
            content: str = todo["content"]
            return content
    return None
