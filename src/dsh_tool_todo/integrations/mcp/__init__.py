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

from ... import __version__
from ...core.contract import TOOL_NAME
from ...core.tool import todo_write_tool
from ...errors import LogBusy
from ...stores.owners import OwnerRegistry
from .._core import arun_for_owner, check_owner, check_owners
from .._extras import missing_extra
from ._plan import MIME_TYPE, PLAN_URI, PlanResource, unknown_resource_message

try:
    # Submodules by name (never a bare `import mcp`): a user's own `mcp.py` on
    # sys.path then fails here, with the extra named, not deep inside a call.
    import mcp.types as types
    from mcp.server.lowlevel import Server
    from mcp.server.stdio import stdio_server
    from mcp.shared import exceptions as _exceptions
except ImportError as _error:
    raise missing_extra("dsh_tool_todo.integrations.mcp", "mcp", _error, module="mcp") from _error

__all__ = ["PLAN_URI", "SERVER_NAME", "build_server", "serve_stdio"]

SERVER_NAME = "dsh-tool-todo"
DEFAULT_OWNER = "mcp"
_OWNER_POLL_SECONDS = 0.05
"""The owner key of a server's one agent when the caller names none."""

# 2.x takes its handlers as constructor arguments; 1.x registers them with decorators.
_DECORATORS = hasattr(Server, "call_tool")
# What a handler raises to be answered with a JSON-RPC error: 2.x MCPError(code, message),
# 1.x McpError(ErrorData).
_PROTOCOL_ERROR: Any = getattr(_exceptions, "MCPError", None) or _exceptions.McpError


def build_server(
    *,
    allow_parallel_in_progress: bool,
    owners: OwnerRegistry | None = None,
    owner: str = DEFAULT_OWNER,
) -> Server[Any]:
    """A low-level MCP server offering ``todo_write`` for one agent, ``owner`` of ``owners``.

    ``owners`` defaults to an in-memory registry; pass a durable one
    (``OwnerRegistry(directory)``) to keep the plan across restarts.
    """
    check_owner("build_server", owner, function_of=None)
    tool = todo_write_tool(allow_parallel_in_progress=allow_parallel_in_progress)
    check_owners("build_server", owners)
    registry = OwnerRegistry() if owners is None else owners
    plan = PlanResource(registry, owner)
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
        outcome = await arun_for_owner(tool, arguments or {}, registry, owner)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=outcome.text)], isError=outcome.is_error
        )

    call = plan.watching(call)

    if _DECORATORS:
        server: Server[Any] = _Server1x(SERVER_NAME, version=__version__)

        @server.list_tools()  # type: ignore[no-untyped-call,untyped-decorator]
        async def list_tools() -> list[types.Tool]:
            return [definition]

        # Registered as the request's own handler, not with `@server.call_tool()`: that
        # decorator checks the arguments against the schema before our validator writes its
        # text, and turns every exception, an unknown tool's included, into a tool result.
        async def call_tool(request: types.CallToolRequest) -> types.ServerResult:
            return types.ServerResult(await call(request.params.name, request.params.arguments))

        server.request_handlers[types.CallToolRequest] = call_tool
        _serve_plan_1x(server, plan)
        return server

    async def on_list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[definition])

    async def on_call_tool(ctx: Any, params: Any) -> types.CallToolResult:
        return await call(params.name, params.arguments)

    server_2x = cast(Any, Server)(
        SERVER_NAME,
        version=__version__,
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
) -> None:
    """Serve one agent over stdin/stdout until the client closes the connection.

    The owner's session is opened before serving. When another process holds it
    (another server on the same durable owner: a client that starts one server
    per call starts several at once), this one waits up to ``wait_owner``
    seconds for it, then raises :class:`~dsh_tool_todo.errors.LogBusy`, before
    reading anything from the client.
    """
    check_owner("serve_stdio", owner, function_of=None)
    check_owners("serve_stdio", owners)
    registry = OwnerRegistry(max_owners=None) if owners is None else owners
    deadline = time.monotonic() + wait_owner
    while True:
        try:
            registry.session(owner)
            break
        except LogBusy:
            if time.monotonic() >= deadline:
                raise
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


def _unknown_tool(name: str) -> Exception:
    message = f"unknown tool {name!r}: this server offers only {TOOL_NAME}"
    if _DECORATORS:
        error: Exception = _PROTOCOL_ERROR(
            types.ErrorData(code=types.INVALID_PARAMS, message=message)
        )
    else:
        error = _PROTOCOL_ERROR(types.INVALID_PARAMS, message)
    return error


def _invalid_params(message: str) -> Exception:
    if _DECORATORS:
        return cast(
            Exception,
            _PROTOCOL_ERROR(types.ErrorData(code=types.INVALID_PARAMS, message=message)),
        )
    return cast(Exception, _PROTOCOL_ERROR(types.INVALID_PARAMS, message))


def _plan_uri(uri: object) -> str:
    """``uri`` if it names the plan; else the invalid-params error the client reads."""
    text = str(uri)
    if text != PLAN_URI:
        raise _invalid_params(unknown_resource_message(text))
    return text


def _plan_resource(plan: PlanResource) -> types.Resource:
    return types.Resource(
        uri=cast(Any, PLAN_URI),
        name="plan",
        title="Todo plan",
        description=plan.description,
        mimeType=MIME_TYPE,
    )


async def _plan_contents(plan: PlanResource) -> types.ReadResourceResult:
    text = await plan.read()
    return types.ReadResourceResult(
        contents=[
            types.TextResourceContents(uri=cast(Any, PLAN_URI), mimeType=MIME_TYPE, text=text)
        ]
    )


class _Server1x(Server[Any]):
    """The 1.x low-level server, saying that it takes subscriptions: 1.x always says not."""

    def get_capabilities(self, *args: Any, **kwargs: Any) -> types.ServerCapabilities:
        capabilities = super().get_capabilities(*args, **kwargs)
        if capabilities.resources is not None:
            capabilities.resources.subscribe = True
        return capabilities


def _serve_plan_1x(server: Server[Any], plan: PlanResource) -> None:
    """``todo://plan`` on a 1.x server: list, read, subscribe, unsubscribe."""

    async def list_resources(request: types.ListResourcesRequest) -> types.ServerResult:
        return types.ServerResult(types.ListResourcesResult(resources=[_plan_resource(plan)]))

    async def read_resource(request: types.ReadResourceRequest) -> types.ServerResult:
        _plan_uri(request.params.uri)
        return types.ServerResult(await _plan_contents(plan))

    async def subscribe(request: types.SubscribeRequest) -> types.ServerResult:
        uri = _plan_uri(request.params.uri)
        connection: Any = server.request_context.session
        await plan.subscribe(connection, lambda: connection.send_resource_updated(uri))
        return types.ServerResult(types.EmptyResult())

    async def unsubscribe(request: types.UnsubscribeRequest) -> types.ServerResult:
        _plan_uri(request.params.uri)
        plan.unsubscribe(server.request_context.session)
        return types.ServerResult(types.EmptyResult())

    async def list_resource_templates(
        request: types.ListResourceTemplatesRequest,
    ) -> types.ServerResult:
        return types.ServerResult(types.ListResourceTemplatesResult(resourceTemplates=[]))

    handlers: dict[type, Any] = {
        types.ListResourcesRequest: list_resources,
        # none, said plainly: clients that list resources often ask, and "Method not found"
        # reads like a broken server
        types.ListResourceTemplatesRequest: list_resource_templates,
        types.ReadResourceRequest: read_resource,
        types.SubscribeRequest: subscribe,
        types.UnsubscribeRequest: unsubscribe,
    }
    server.request_handlers.update(handlers)


def _connection_2x(ctx: Any) -> Any:
    """The connection a 2.x request came on: what a subscription belongs to.

    The 2.x runner wraps the connection in a new ``ServerSession`` per request,
    so the session cannot tell two requests of one client apart from two
    clients; the connection it wraps can, and sends on the client's standalone
    channel, which outlives the request.
    """
    connection = getattr(ctx.session, "_connection", None)
    return ctx.session if connection is None else connection


def _plan_handlers_2x(plan: PlanResource) -> dict[str, Any]:
    """``todo://plan`` on a 2.x server: the handshake-era ``resources/subscribe`` and, where
    the SDK serves it, the 2026-07-28 wire's ``subscriptions/listen``."""

    async def on_list_resources(ctx: Any, params: Any) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=[_plan_resource(plan)])

    async def on_read_resource(ctx: Any, params: Any) -> types.ReadResourceResult:
        _plan_uri(params.uri)
        return await _plan_contents(plan)

    async def on_subscribe_resource(ctx: Any, params: Any) -> types.EmptyResult:
        uri = _plan_uri(params.uri)
        connection = _connection_2x(ctx)
        await plan.subscribe(connection, lambda: connection.send_resource_updated(uri))
        return types.EmptyResult()

    async def on_unsubscribe_resource(ctx: Any, params: Any) -> types.EmptyResult:
        _plan_uri(params.uri)
        plan.unsubscribe(_connection_2x(ctx))
        return types.EmptyResult()

    async def on_list_resource_templates(
        ctx: Any, params: Any
    ) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(resourceTemplates=[])

    handlers: dict[str, Any] = {
        "on_list_resources": on_list_resources,
        "on_list_resource_templates": on_list_resource_templates,
        "on_read_resource": on_read_resource,
        "on_subscribe_resource": on_subscribe_resource,
        "on_unsubscribe_resource": on_unsubscribe_resource,
    }
    try:
        from mcp.server.subscriptions import (  # type: ignore[import-not-found,unused-ignore]
            InMemorySubscriptionBus,
            ListenHandler,
            ResourceUpdated,
        )
    except ImportError:  # a 2.x release before subscriptions/listen: the handshake era only
        return handlers
    bus = InMemorySubscriptionBus()
    listen = ListenHandler(bus)

    async def publish() -> None:
        await bus.publish(ResourceUpdated(uri=PLAN_URI))

    async def on_subscriptions_listen(ctx: Any, params: Any) -> Any:
        # The SDK honours any URI and never tells of it; an unknown one is refused here.
        for uri in params.notifications.resource_subscriptions or ():
            _plan_uri(uri)
        await plan.subscribe(bus, publish)  # one channel for every listen stream: the bus fans out
        return await listen(ctx, params)

    handlers["on_subscriptions_listen"] = on_subscriptions_listen
    return handlers


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
