"""``todo_write`` as a Model Context Protocol server: exactly one tool, our schema, our texts.

Built on the SDK's low-level ``Server`` (extra ``mcp``; the 1.x and 2.x lines
both work), not its high-level one, which would rewrite the schema from a
Python signature and drop arguments it does not know. What the client gets:

- one tool, ``todo_write``, whose ``inputSchema`` and description are exactly
  what ``dsh-todo schema`` prints (no titles, ``additionalProperties: false``);
- the arguments reach this library's validation untouched (the 1.x server's
  own schema check is off), so an unknown argument such as ``merge`` is
  refused with the tool's own text;
- a refused call is a result with ``isError: true`` whose only content is the
  model text; a recorded call returns the success text; no structured content;
- a call of any other tool name is a JSON-RPC invalid-params error (-32602),
  answered without a line on stderr;
- one resource, ``todo://plan`` (JSON ``{"todos": [...]}``): the server's
  owner's current plan; ``resources/subscribe`` (or, on the 2.x line's
  2026-07-28 wire, ``subscriptions/listen``) brings
  ``notifications/resources/updated`` after each recorded write or clear;
- what a person watching asked (docs/requests.md), told once in the next recorded
  call's result, a second text content after the success text, and listed in
  ``todo://plan`` under ``"requests"`` until the agent's answer settles it;
- ``todo://plan?tree=1``, read and subscribed to the same way, unlisted (asking for it
  is asking for the tree): ``{"session", "todos", "subagents": [...]}``, the owner's
  plan and each session linked under it, attributed to its agent
  (docs/wire-trees.md);
- for a client whose capabilities declare MCP Apps (``io.modelcontextprotocol/ui``
  with ``text/html;profile=mcp-app``), a view of that plan: the tool's
  ``_meta.ui.resourceUri`` names ``ui://dsh-tool-todo/plan``, one HTML document
  the host draws and that re-reads ``todo://plan`` through it; any other client
  sees neither, its tool and resources unchanged;
- a call that could not be recorded (:class:`~dsh_tool_todo.errors.ToolFailure`)
  is ``isError: true`` with :data:`~dsh_tool_todo.core.contract.NOT_RECORDED`, its
  cause logged on the ``dsh_tool_todo`` logger (stderr under ``dsh-todo mcp``:
  stdout is the wire).

One server process serves one agent: its calls are serialised, in arrival
order. No tool-call id is recorded: MCP's JSON-RPC request ids are per
connection and restart at 0, so they cannot tell a retried call from a new one.
MCP has no turns, so nothing appends ``turn/start``: the plan lives
until the client starts a new server or the model replaces it. See
``docs/integrations/mcp.md``.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, cast

from ...core.contract import TOOL_NAME
from ...errors import LogBusy, ToolFailure
from .._binding import Binding, LogReader, OwnerRegistry
from .._extras import needs_extra
from ._plan import PLAN_URI, PlanResource

with needs_extra("dsh_tool_todo.integrations.mcp", "mcp", module="mcp"):
    # Submodules by name (never a bare `import mcp`): a user's own `mcp.py` on
    # sys.path then fails here, with the extra named, not deep inside a call.
    import mcp.types as types
    from mcp.server.lowlevel import Server
    from mcp.server.stdio import stdio_server

from ._handlers import (
    _DECORATORS,
    _plan_handlers_2x,
    _serve_plan_1x,
    _Server1x,
    _unknown_tool,
    _with_view,
)
from ._told import telling
from ._view import declares_apps

__all__ = ["PLAN_URI", "build_server", "serve_stdio"]

SERVER_NAME = "dsh-tool-todo"
DEFAULT_OWNER = "mcp"
_OWNER_POLL_SECONDS = 0.05
"""The owner key of a server's one agent when the caller names none."""


def build_server(
    *,
    allow_parallel_in_progress: bool,
    owners: OwnerRegistry | None = None,
    owner: str = DEFAULT_OWNER,
    reader: LogReader | None = None,
) -> Server[Any]:
    """A low-level MCP server offering ``todo_write`` for one agent, ``owner`` of ``owners``.

    ``owners`` defaults to an in-memory registry; pass a durable one
    (``OwnerRegistry(directory)``) to keep the plan across restarts.
    ``todo://plan?tree=1`` lists the sessions under the owner's that ``reader`` (a
    :class:`~dsh_tool_todo.protocols.LogReader`; default: the registry's directory's) sees.
    """
    parallel = allow_parallel_in_progress
    binding = Binding(
        "build_server", allow_parallel_in_progress=parallel, owner=owner, owners=owners
    )
    tool = binding.tool
    plan = PlanResource(binding.owners, owner, reader)
    definition = types.Tool(
        name=tool.name,
        description=tool.description,
        inputSchema=dict(tool.parameters),
        # A whole-list replacement: same arguments, same outcome; it touches only the plan.
        annotations=types.ToolAnnotations(
            readOnlyHint=False, destructiveHint=False, idempotentHint=True, openWorldHint=False
        ),
    )

    async def call(name: str, arguments: Mapping[str, Any] | None) -> types.CallToolResult:
        if name != TOOL_NAME:
            # A protocol error, not a tool result: the model never chose this name from our list.
            raise _unknown_tool(name)
        # No call id: JSON-RPC request ids are per connection and restart at 0, so the same
        # id names different calls across reconnects, and a retry may come with a new one.
        outcome = await binding.acall(arguments or {}, owner)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=outcome.text)], isError=outcome.is_error
        )

    # the requests are taken once the plan resource listens again: it shows them pending
    answer = telling(plan.watching(call), binding.owners, owner)
    app_definition = _with_view(definition)

    def tools_for(session: object) -> list[types.Tool]:
        # Only a client that declared MCP Apps is told of the view: others see the tool unchanged.
        return [app_definition if declares_apps(session) else definition]

    if _DECORATORS:
        server: Server[Any] = _Server1x(SERVER_NAME, version=Binding.version)

        @server.list_tools()  # type: ignore[no-untyped-call,untyped-decorator]
        async def list_tools() -> list[types.Tool]:
            return tools_for(server.request_context.session)

        # Registered as the request's own handler, not with `@server.call_tool()`: that
        # decorator checks the arguments against the schema before our validator writes its
        # text, and turns every exception, an unknown tool's included, into a tool result.
        async def call_tool(request: types.CallToolRequest) -> types.ServerResult:
            return types.ServerResult(await answer(request.params.name, request.params.arguments))

        server.request_handlers[types.CallToolRequest] = call_tool
        _serve_plan_1x(server, plan)
        return server

    async def on_list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools_for(ctx.session))

    async def on_call_tool(ctx: Any, params: Any) -> types.CallToolResult:
        return await answer(params.name, params.arguments)

    server_2x = cast(Any, Server)(
        SERVER_NAME,
        version=Binding.version,
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
        **_plan_handlers_2x(plan),
    )
    return cast("Server[Any]", server_2x)


async def serve_stdio(
    *,
    allow_parallel_in_progress: bool,
    owners: OwnerRegistry | None = None,
    owner: str = DEFAULT_OWNER,
    wait_owner: float = 0.0,
    hold_owner: bool = True,
) -> None:
    """Serve one agent over stdin/stdout until the client closes the connection.

    The owner's session is opened before serving. When another process holds it
    (another server on the same durable owner: a client that starts one server
    per call starts several at once), this one waits up to ``wait_owner``
    seconds for it, then raises :class:`~dsh_tool_todo.errors.LogBusy`, before
    reading anything from the client. With ``hold_owner=False`` (an owner no
    other server shares, as ``dsh-todo mcp``'s own per-server log) it is opened
    by the first call instead: a server no call reaches makes no log, and
    ``todo://plan`` reads an owner's log not made yet as an empty plan.
    """
    Binding.check_owner("serve_stdio", owner)
    registry = Binding.registry("serve_stdio", owners, max_owners=None)
    deadline = time.monotonic() + wait_owner
    while hold_owner:
        try:
            registry.session(owner)
            break
        except ToolFailure as failure:  # the registry's; the store's refusal is its cause
            if not isinstance(failure.__cause__, LogBusy):
                raise
            if time.monotonic() >= deadline:
                raise failure.__cause__ from None
            await asyncio.sleep(_OWNER_POLL_SECONDS)
    server = build_server(
        allow_parallel_in_progress=allow_parallel_in_progress, owners=registry, owner=owner
    )
    try:
        if not _DECORATORS:  # 2.x diverts fd 0 and 1 itself while serving, and restores them
            async with stdio_server() as (read_stream, write_stream):
                await server.run(read_stream, write_stream, server.create_initialization_options())
            return
        with _claimed_stdio() as (stdin, stdout):
            async with stdio_server(stdin, stdout) as (read_stream, write_stream):
                await server.run(read_stream, write_stream, server.create_initialization_options())
    except Exception as error:
        # 2.x reports the client gone mid-answer from its task group, as an exception group:
        # the same closed pipe 1.x raises plainly, and `dsh-todo mcp` ends quietly on it.
        if not isinstance(error, BrokenPipeError) and _only_closed_pipes(error):
            raise BrokenPipeError("the MCP client closed the connection") from None
        raise


def _only_closed_pipes(error: BaseException) -> bool:
    """Whether ``error`` is a closed pipe, or a group (nested or not) of nothing else.

    Duck-typed on ``exceptions`` so Python 3.10's backport groups count too.
    """
    leaves = getattr(error, "exceptions", None)
    if not isinstance(leaves, tuple):
        return isinstance(error, BrokenPipeError)
    return bool(leaves) and all(_only_closed_pipes(leaf) for leaf in leaves)


@contextmanager
def _claimed_stdio() -> Iterator[tuple[Any, Any]]:
    """The wire on copies of fd 0 and 1, as the 2.x SDK does it for 1.x.

    While serving, fd 1 points at stderr, so a stray write to stdout (a print
    in a listener, a library's warning) cannot corrupt the protocol; and the
    1.x transport's own wrapper would close ``sys.stdout`` when collected.
    """
    import anyio

    sys.stdout.flush()
    wire_in = open(os.dup(0), encoding="utf-8", errors="replace")  # noqa: SIM115
    wire_out = open(os.dup(1), "w", encoding="utf-8")  # noqa: SIM115
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield anyio.wrap_file(wire_in), anyio.wrap_file(wire_out)
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)
        wire_out.close()
        wire_in.close()
