"""An official MCP client that declares MCP Apps, on either line of the `mcp` package.

A 2.x client declares the extension with the SDK's own `advertise`; a 1.x
session has no way to, so it sends it in its `initialize` capabilities, where
the 1.x model keeps fields it does not know.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import IO, Any

import mcp
import mcp.types as types

from dsh_tool_todo.integrations.mcp._view import EXTENSION_ID, VIEW_MIME_TYPE

APPS: dict[str, Any] = {EXTENSION_ID: {"mimeTypes": [VIEW_MIME_TYPE]}}


class AppsSession(mcp.ClientSession):
    """A 1.x client session that declares ``extensions`` in its ``initialize`` capabilities."""

    extensions: dict[str, Any] = APPS

    async def send_request(self, request: Any, *args: Any, **kwargs: Any) -> Any:
        sent = getattr(request, "root", None)
        if isinstance(sent, types.InitializeRequest):
            declared = sent.params.capabilities.model_dump(by_alias=True, exclude_none=True)
            sent.params.capabilities = types.ClientCapabilities.model_validate(
                {**declared, "extensions": self.extensions}
            )
        return await super().send_request(request, *args, **kwargs)


def advertised(extensions: dict[str, Any]) -> list[Any]:
    """``extensions`` as the 2.x client takes them."""
    from mcp.client import advertise

    return [advertise(name, settings) for name, settings in extensions.items()]


@asynccontextmanager
async def apps_spawned(
    command: str, args: list[str], *, errlog: IO[str], extensions: dict[str, Any] = APPS
) -> AsyncIterator[Any]:
    """An initialised official client on ``command args`` over stdio, declaring ``extensions``."""
    from mcp.client.stdio import StdioServerParameters, stdio_client

    parameters = StdioServerParameters(command=command, args=args)
    if hasattr(mcp, "Client"):
        transport = stdio_client(parameters, errlog=errlog)
        async with mcp.Client(transport, extensions=advertised(extensions)) as client:
            yield client
        return
    async with stdio_client(parameters, errlog=errlog) as (read, write):
        session = AppsSession(read, write)
        session.extensions = extensions
        async with session:
            await session.initialize()
            yield session
