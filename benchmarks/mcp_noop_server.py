"""The MCP reference for bench_adapters: a tool that does nothing, served as `dsh-todo mcp` is.

The same SDK, the same low-level server and stdio transport, the same tool
definition and the same answer text; only the call does no work (no
validation, no session). Run: python benchmarks/mcp_noop_server.py
"""

from __future__ import annotations

import asyncio
from typing import Any

import mcp.types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from dsh_tool_todo import todo_write_tool

TOOL = todo_write_tool(allow_parallel_in_progress=False)
DEFINITION = types.Tool(
    name=TOOL.name, description=TOOL.description, inputSchema=dict(TOOL.parameters)
)
ANSWER = types.CallToolResult(
    content=[
        types.TextContent(
            type="text", text="Updated todo list: 0 pending, 0 in progress, 0 completed."
        )
    ],
    isError=False,
)


def build() -> Any:
    async def call(name: str, arguments: Any) -> types.CallToolResult:
        return ANSWER

    if hasattr(Server, "call_tool"):  # the 1.x line: decorators
        server: Any = Server("noop", version="0")

        @server.list_tools()  # type: ignore[untyped-decorator]
        async def list_tools() -> list[types.Tool]:
            return [DEFINITION]

        @server.call_tool(validate_input=False)  # type: ignore[untyped-decorator]
        async def call_tool(name: str, arguments: Any) -> types.CallToolResult:
            return await call(name, arguments)

        return server

    async def on_list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[DEFINITION])

    async def on_call_tool(ctx: Any, params: Any) -> types.CallToolResult:
        return await call(params.name, params.arguments)

    return Server("noop", version="0", on_list_tools=on_list_tools, on_call_tool=on_call_tool)  # type: ignore[call-arg]


async def main() -> None:
    server = build()
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


if __name__ == "__main__":
    asyncio.run(main())
