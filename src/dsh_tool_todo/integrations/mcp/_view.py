"""The plan's MCP App view: ``ui://dsh-tool-todo/plan``, for hosts that render MCP Apps.

MCP Apps (extension ``io.modelcontextprotocol/ui``, spec 2026-01-26) lets a
tool name an HTML view in its ``_meta.ui.resourceUri``; the host reads it with
``resources/read``, draws it in a sandboxed iframe and relays the view's own
``resources/read`` calls to the server. The view, ``plan_view.html`` beside
this module, is one document with nothing to load; it draws ``todo://plan``.

Version-neutral: the handlers of either SDK line ask :func:`declares_apps` of
the request's session. A client that did not declare the extension with the
view's MIME type sees the tool and the resources it saw before the view existed.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from importlib import resources
from typing import Any

from ._plan import PLAN_URI, unknown_resource_message

EXTENSION_ID = "io.modelcontextprotocol/ui"
VIEW_MIME_TYPE = "text/html;profile=mcp-app"
VIEW_URI = "ui://dsh-tool-todo/plan"
VIEW_NAME = "plan-view"
VIEW_TITLE = "Todo plan view"
VIEW_DESCRIPTION = (
    f"An MCP App view of {PLAN_URI}: progress, the item in progress and the checklist, "
    "redrawn as the plan changes."
)
# No csp: the view loads nothing, so the host's most restrictive default fits it.
VIEW_META: dict[str, Any] = {"ui": {"prefersBorder": True}}
TOOL_META: dict[str, Any] = {"ui": {"resourceUri": VIEW_URI}}


@functools.cache
def view_html() -> str:
    """The view's HTML document, as shipped in the package."""
    return resources.files(__package__).joinpath("plan_view.html").read_text(encoding="utf-8")


def declares_apps(session: object) -> bool:
    """Whether the client behind ``session`` declared MCP Apps with the view's MIME type.

    Read from the capabilities the client declared: the 2.x line's
    ``client_capabilities`` (the handshake's or, on its 2026-07-28 wire, the
    request envelope's), else the handshake's ``client_params`` (1.x, where
    ``extensions`` is a field the model keeps without knowing it).
    """
    capabilities = getattr(session, "client_capabilities", None)
    if capabilities is None:
        capabilities = getattr(getattr(session, "client_params", None), "capabilities", None)
    extensions = getattr(capabilities, "extensions", None)
    settings = extensions.get(EXTENSION_ID) if isinstance(extensions, Mapping) else None
    mime_types = settings.get("mimeTypes") if isinstance(settings, Mapping) else None
    return isinstance(mime_types, list | tuple) and VIEW_MIME_TYPE in mime_types


def refusal_for_app_client(uri: str) -> str:
    """What an MCP Apps client is told for ``uri``, which is not the plan."""
    if uri == VIEW_URI:
        return (
            f"{VIEW_URI} never changes and cannot be subscribed to: subscribe to {PLAN_URI}, "
            "which it draws"
        )
    return f"{unknown_resource_message(uri)} and its view {VIEW_URI}"
