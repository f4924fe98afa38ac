"""The MCP SDK's side of the server: ``todo://plan``'s handlers and the protocol errors, per line.

Each handler asks the request's session whether its client declared MCP Apps
(``_view.declares_apps``): only then are the plan's view and the tool's link to
it offered.

The 1.x line registers request handlers in a table and says it takes no
subscriptions; the 2.x line takes its handlers as constructor arguments.
"""

from __future__ import annotations

from typing import Any, cast

import mcp.types as types
from mcp.server.lowlevel import Server
from mcp.shared import exceptions as _exceptions

from ...core.contract import TOOL_NAME
from ._plan import MIME_TYPE, PLAN_URI, TREE_URI, PlanResource, unknown_resource_message
from ._view import (
    TOOL_META,
    VIEW_DESCRIPTION,
    VIEW_META,
    VIEW_MIME_TYPE,
    VIEW_NAME,
    VIEW_TITLE,
    VIEW_URI,
    declares_apps,
    refusal_for_app_client,
    view_html,
)

# 2.x takes its handlers as constructor arguments; 1.x registers them with decorators.
_DECORATORS = hasattr(Server, "call_tool")
# What a handler raises to be answered with a JSON-RPC error: 2.x MCPError(code, message),
# 1.x McpError(ErrorData).
_PROTOCOL_ERROR: Any = getattr(_exceptions, "MCPError", None) or _exceptions.McpError


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


def _plan_uri(uri: object, session: object = None) -> str:
    """``uri`` if it names the plan (or the plan's tree); else the invalid-params error the
    client on ``session`` reads (an MCP Apps client is told of the view too)."""
    text = str(uri)
    if text not in (PLAN_URI, TREE_URI):
        if declares_apps(session):
            raise _invalid_params(refusal_for_app_client(text))
        raise _invalid_params(unknown_resource_message(text))
    return text


def _with_view(tool: types.Tool) -> types.Tool:
    """``tool`` naming the plan's view, for an MCP Apps client."""
    return tool.model_copy(update={"meta": {**(tool.meta or {}), **TOOL_META}})


def _resources(plan: PlanResource, session: object) -> list[types.Resource]:
    listed = [_plan_resource(plan)]
    if declares_apps(session):
        listed.append(
            types.Resource.model_validate(
                {
                    "uri": VIEW_URI,
                    "name": VIEW_NAME,
                    "title": VIEW_TITLE,
                    "description": VIEW_DESCRIPTION,
                    "mimeType": VIEW_MIME_TYPE,
                    "_meta": VIEW_META,
                }
            )
        )
    return listed


async def _read(plan: PlanResource, uri: object, session: object) -> types.ReadResourceResult:
    if str(uri) == VIEW_URI and declares_apps(session):
        view = {
            "uri": VIEW_URI,
            "mimeType": VIEW_MIME_TYPE,
            "text": view_html(),
            "_meta": VIEW_META,
        }
        return types.ReadResourceResult(contents=[types.TextResourceContents.model_validate(view)])
    if _plan_uri(uri, session) == TREE_URI:
        return _contents(TREE_URI, await plan.read_tree())
    return await _plan_contents(plan)


def _plan_resource(plan: PlanResource) -> types.Resource:
    return types.Resource(
        uri=cast(Any, PLAN_URI),
        name="plan",
        title="Todo plan",
        description=plan.description,
        mimeType=MIME_TYPE,
    )


async def _plan_contents(plan: PlanResource) -> types.ReadResourceResult:
    return _contents(PLAN_URI, await plan.read())


def _contents(uri: str, text: str) -> types.ReadResourceResult:
    return types.ReadResourceResult(
        contents=[types.TextResourceContents(uri=cast(Any, uri), mimeType=MIME_TYPE, text=text)]
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
        resources = _resources(plan, server.request_context.session)
        return types.ServerResult(types.ListResourcesResult(resources=resources))

    async def read_resource(request: types.ReadResourceRequest) -> types.ServerResult:
        session = server.request_context.session
        return types.ServerResult(await _read(plan, request.params.uri, session))

    async def subscribe(request: types.SubscribeRequest) -> types.ServerResult:
        uri = _plan_uri(request.params.uri, server.request_context.session)
        connection: Any = server.request_context.session
        await plan.subscribe(connection, lambda: connection.send_resource_updated(uri), uri)
        return types.ServerResult(types.EmptyResult())

    async def unsubscribe(request: types.UnsubscribeRequest) -> types.ServerResult:
        uri = _plan_uri(request.params.uri, server.request_context.session)
        plan.unsubscribe(server.request_context.session, uri)
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
        return types.ListResourcesResult(resources=_resources(plan, ctx.session))

    async def on_read_resource(ctx: Any, params: Any) -> types.ReadResourceResult:
        return await _read(plan, params.uri, ctx.session)

    async def on_subscribe_resource(ctx: Any, params: Any) -> types.EmptyResult:
        uri = _plan_uri(params.uri, ctx.session)
        connection = _connection_2x(ctx)
        await plan.subscribe(connection, lambda: connection.send_resource_updated(uri), uri)
        return types.EmptyResult()

    async def on_unsubscribe_resource(ctx: Any, params: Any) -> types.EmptyResult:
        uri = _plan_uri(params.uri, ctx.session)
        plan.unsubscribe(_connection_2x(ctx), uri)
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

    def publisher(uri: str) -> Any:
        async def publish() -> None:
            await bus.publish(ResourceUpdated(uri=uri))

        return publish

    async def on_subscriptions_listen(ctx: Any, params: Any) -> Any:
        # The SDK honours any URI and never tells of it; an unknown one is refused here.
        uris = {
            _plan_uri(uri, ctx.session) for uri in params.notifications.resource_subscriptions or ()
        }
        for uri in sorted(uris or {PLAN_URI}):
            # one channel per URI for every listen stream: the bus fans out
            await plan.subscribe(bus, publisher(uri), uri)
        return await listen(ctx, params)

    handlers["on_subscriptions_listen"] = on_subscriptions_listen
    return handlers
