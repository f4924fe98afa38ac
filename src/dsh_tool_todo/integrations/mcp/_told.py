"""A person's requests in the next ``todo_write`` result: MCP has no hook before a model request.

What a person watching asked (docs/requests.md) is taken after each recorded call and,
when any is pending, told in that call's result: a second text content after the success
text, which stays as it is, byte for byte. Told once: the requests are recorded as told
(``request/taken``, told), and ``todo://plan`` lists them under ``"requests"`` until the
agent's answer settles them. A refused call's result stays its one text.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import mcp.types as types

from .._binding import OwnerRegistry
from .._notice import atold

Call = Callable[[str, Mapping[str, Any] | None], Awaitable[types.CallToolResult]]


def telling(call: Call, owners: OwnerRegistry, owner: str) -> Call:
    """``call``, with the request notice added to each recorded call's result."""

    async def told(name: str, arguments: Mapping[str, Any] | None) -> types.CallToolResult:
        result = await call(name, arguments)
        # 1.x names the field as the wire does, 2.x in snake case
        if getattr(result, "isError", None) or getattr(result, "is_error", None):
            return result
        text = await atold(owners, owner)
        if text is None:
            return result
        notice = types.TextContent(type="text", text=text)
        return result.model_copy(update={"content": [*result.content, notice]})

    return told
