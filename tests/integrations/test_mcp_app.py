"""The plan's MCP App view: offered to a client that declares MCP Apps, and to no other.

Runs against whichever line of the `mcp` package is installed (the client
declares the extension as tests/integrations/mcp_apps_client.py says). The view
itself is driven by the Apps SDK's host in Chromium:
tests/web/browser/test_mcp_app.py.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import mcp
import mcp.types as types
import pytest

from dsh_tool_todo.integrations.mcp import PLAN_URI, build_server
from dsh_tool_todo.integrations.mcp._plan import unknown_resource_message
from dsh_tool_todo.integrations.mcp._view import (
    EXTENSION_ID,
    VIEW_MIME_TYPE,
    VIEW_URI,
    declares_apps,
    view_html,
)
from dsh_tool_todo.stores.owners import OwnerRegistry
from tests.integrations.mcp_apps_client import APPS, AppsSession, advertised
from tests.integrations.test_mcp import (
    CLIENT_MODES,
    INVALID_PARAMS,
    PLAN,
    PROTOCOL_ERROR,
    Updates,
    raw_server,
    schema_printed,
    subscribed,
    wire,
)

VIEW_FILE = Path(build_server.__code__.co_filename).parent / "plan_view.html"
WEB_SCRIPT = VIEW_FILE.parents[2] / "web" / "static" / "app.js"


@asynccontextmanager
async def apps_client(
    server: Any, *, mode: str = "auto", extensions: dict[str, Any] = APPS
) -> AsyncIterator[Any]:
    """An initialised official client on ``server``, in-process, declaring ``extensions``."""
    if hasattr(mcp, "Client"):
        async with mcp.Client(server, extensions=advertised(extensions), mode=mode) as client:
            yield client
        return
    import anyio
    from mcp.shared.memory import create_client_server_memory_streams

    async with (
        create_client_server_memory_streams() as ((client_read, client_write), server_streams),
        anyio.create_task_group() as group,
    ):
        group.start_soon(
            lambda: server.run(*server_streams, server.create_initialization_options())
        )
        session = AppsSession(client_read, client_write)
        session.extensions = extensions
        async with session:
            await session.initialize()
            yield session
        group.cancel_scope.cancel()


async def offered(client: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The one tool and the resources ``client`` is offered, as they travel."""
    (tool,) = (await client.list_tools()).tools
    return wire(tool), [wire(resource) for resource in (await client.list_resources()).resources]


def plain_tool() -> dict[str, Any]:
    printed = schema_printed()
    hints = {"readOnlyHint": False, "destructiveHint": False, "idempotentHint": True}
    return {
        "name": printed["name"],
        "description": printed["description"],
        "inputSchema": printed["parameters"],
        "annotations": {**hints, "openWorldHint": False},
    }


@pytest.mark.parametrize("mode", CLIENT_MODES)
def test_an_apps_client_is_offered_the_view_and_the_tool_names_it(mode: str) -> None:
    owners = OwnerRegistry()
    server = build_server(allow_parallel_in_progress=False, owners=owners)

    async def run() -> tuple[Any, ...]:
        async with apps_client(server, mode=mode) as client:
            tool, resources = await offered(client)
            (view,) = (await client.read_resource(VIEW_URI)).contents
            await client.call_tool("todo_write", PLAN)
            (plan,) = (await client.read_resource(PLAN_URI)).contents
            return tool, resources, wire(view), wire(plan)

    tool, resources, view, plan = asyncio.run(run())
    assert tool == {**plain_tool(), "_meta": {"ui": {"resourceUri": VIEW_URI}}}
    assert [resource["uri"] for resource in resources] == [PLAN_URI, VIEW_URI]
    assert resources[1] == {
        "uri": "ui://dsh-tool-todo/plan",
        "name": "plan-view",
        "title": "Todo plan view",
        "description": resources[1]["description"],
        "mimeType": "text/html;profile=mcp-app",
        "_meta": {"ui": {"prefersBorder": True}},
    }
    assert view == {
        "uri": VIEW_URI,
        "mimeType": "text/html;profile=mcp-app",
        "text": VIEW_FILE.read_text(encoding="utf-8"),
        "_meta": {"ui": {"prefersBorder": True}},
    }
    assert view["text"].startswith("<!doctype html>")
    assert json.loads(plan["text"]) == PLAN  # the plan itself is the same resource for both


@pytest.mark.parametrize("mode", CLIENT_MODES)
@pytest.mark.parametrize(
    "extensions",
    [
        {},
        {EXTENSION_ID: {}},  # the extension without the MIME type it draws in
        {EXTENSION_ID: {"mimeTypes": ["text/html"]}},
        {"com.example/other": {"mimeTypes": [VIEW_MIME_TYPE]}},
    ],
    ids=["none", "no-mime-types", "other-mime-type", "other-extension"],
)
def test_any_other_client_sees_the_tool_and_resource_it_saw_before(
    mode: str, extensions: dict[str, Any]
) -> None:
    server = build_server(allow_parallel_in_progress=False)

    async def run() -> tuple[Any, ...]:
        async with apps_client(server, mode=mode, extensions=extensions) as client:
            tool, resources = await offered(client)
            with pytest.raises(PROTOCOL_ERROR, match=r"offers only todo://plan$") as read:
                await client.read_resource(VIEW_URI)
            return tool, resources, read.value

    tool, resources, refused = asyncio.run(run())
    assert tool == plain_tool()
    assert [resource["uri"] for resource in resources] == [PLAN_URI]
    assert "_meta" not in resources[0]
    assert refused.error.code == INVALID_PARAMS
    assert refused.error.message == unknown_resource_message(VIEW_URI)


def test_dsh_todo_mcp_answers_a_plain_client_with_no_word_of_the_view(tmp_path: Path) -> None:
    """The bytes a client that declares nothing reads: not one field more than before."""
    with raw_server("--log-dir", str(tmp_path), errlog=tmp_path / "server.err") as server:
        server.initialize()
        answers = [
            server.request("tools/list", {}),
            server.request("resources/list", {}),
            server.request("resources/templates/list", {}),
            server.request("resources/read", {"uri": VIEW_URI}),
        ]
    raw = [json.dumps(answer) for answer in answers]
    assert not [line for line in raw[:3] if "ui://" in line or "_meta" in line or "ui/" in line]
    assert answers[0]["result"] == {"tools": [plain_tool()]}
    (plan,) = answers[1]["result"]["resources"]
    assert (plan["uri"], set(plan)) == (
        PLAN_URI,
        {"uri", "name", "title", "description", "mimeType"},
    )
    assert answers[2]["result"] == {"resourceTemplates": []}
    assert answers[3]["error"] == {
        "code": INVALID_PARAMS,
        "message": unknown_resource_message(VIEW_URI),
    }
    assert (tmp_path / "server.err").read_text(encoding="utf-8") == ""


def test_dsh_todo_mcp_offers_the_view_to_a_client_that_declares_apps(tmp_path: Path) -> None:
    with raw_server("--log-dir", str(tmp_path), errlog=tmp_path / "server.err") as server:
        capabilities = {"extensions": APPS}
        client = {"name": "raw", "version": "0"}
        server.request(
            "initialize",
            {"protocolVersion": "2025-06-18", "capabilities": capabilities, "clientInfo": client},
        )
        server.send({"method": "notifications/initialized"})
        (tool,) = server.request("tools/list", {})["result"]["tools"]
        (view,) = server.request("resources/read", {"uri": VIEW_URI})["result"]["contents"]
    assert tool["_meta"] == {"ui": {"resourceUri": VIEW_URI}}
    assert (view["mimeType"], view["text"]) == (VIEW_MIME_TYPE, view_html())


@pytest.mark.parametrize("mode", CLIENT_MODES)
def test_an_apps_client_is_told_what_there_is_for_a_uri_that_is_not_the_plan(mode: str) -> None:
    server = build_server(allow_parallel_in_progress=False)

    async def run() -> list[Any]:
        async with apps_client(server, mode=mode) as client:
            errors = []
            with pytest.raises(
                PROTOCOL_ERROR,
                match=r"unknown resource 'todo://plans': this server offers only todo://plan "
                r"and its view ui://dsh-tool-todo/plan",
            ) as unknown:
                await client.read_resource("todo://plans")
            errors.append(unknown.value)
            with pytest.raises(
                PROTOCOL_ERROR, match="never changes and cannot be subscribed to"
            ) as subscribing:
                async with subscribed(client, Updates(), VIEW_URI):
                    pass
            errors.append(subscribing.value)
            return errors

    assert {error.error.code for error in asyncio.run(run())} == {INVALID_PARAMS}


class Document(HTMLParser):
    """The elements, attributes and inline texts of an HTML document."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.attributes: list[tuple[str, str, str | None]] = []
        self.texts: dict[str, list[str]] = {}
        self._open: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attributes.extend((tag, name, value) for name, value in attrs)
        self._open = tag

    def handle_data(self, data: str) -> None:
        if self._open in ("script", "style"):
            self.texts.setdefault(self._open, []).append(data)

    def handle_endtag(self, tag: str) -> None:
        self._open = None


def test_the_view_is_one_document_that_loads_nothing() -> None:
    document = Document()
    document.feed(view_html())
    assert document.tags.count("script") == document.tags.count("style") == 1
    assert not {"link", "img", "iframe", "object", "embed", "base", "form"} & set(document.tags)
    # No attribute can reach out (src, href, srcset, action...) or run code (on...).
    assert [
        (tag, name)
        for tag, name, _ in document.attributes
        if name in ("src", "href", "srcset", "action", "http-equiv") or name.startswith("on")
    ] == []
    (script,) = document.texts["script"]
    (style,) = document.texts["style"]
    for way_out in ("fetch(", "XMLHttpRequest", "WebSocket", "EventSource", "import(", "eval("):
        assert way_out not in script
    for way_out in ("url(", "@import"):
        assert way_out not in style
    assert "innerHTML" not in script
    assert "insertAdjacentHTML" not in script
    assert f'"{PLAN_URI}"' in script  # the resource it reads, by the server's own name


def test_the_view_escapes_what_the_web_view_escapes() -> None:
    def invisible(source: str) -> str:
        (pattern,) = re.findall(r"const INVISIBLE = (/.*/g);", source)
        return pattern

    assert invisible(view_html()) == invisible(WEB_SCRIPT.read_text(encoding="utf-8"))


def test_declares_apps_reads_either_lines_capabilities() -> None:
    class Session:
        def __init__(self, **fields: Any) -> None:
            self.__dict__.update(fields)

    declared = types.ClientCapabilities.model_validate({"extensions": APPS})
    handshake = types.InitializeRequestParams.model_validate(
        {
            "protocolVersion": "2025-06-18",
            "capabilities": {"extensions": APPS},
            "clientInfo": {"name": "c", "version": "0"},
        }
    )
    assert declares_apps(Session(client_capabilities=declared))
    assert declares_apps(Session(client_capabilities=None, client_params=handshake))
    assert not declares_apps(Session(client_capabilities=types.ClientCapabilities()))
    assert not declares_apps(Session(client_params=None))
    assert not declares_apps(None)
    # a string, not a list: the MIME type as a substring of it is not a declaration
    odd = types.ClientCapabilities.model_validate(
        {"extensions": {EXTENSION_ID: {"mimeTypes": VIEW_MIME_TYPE}}}
    )
    assert not declares_apps(Session(client_capabilities=odd))
