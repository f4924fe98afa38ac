"""A host for the plan's MCP App view, in the browser, on a real `dsh-todo mcp`.

The host page runs the Apps SDK's own ``AppBridge`` (tests/node/mcp_app_host.mjs,
bundled by esbuild from the packages `npm ci --prefix tests/node` installs: no
network). It loads the view, as the server hands it over, into a sandboxed
iframe on another origin, under the content-security policy the MCP Apps spec
makes a host's default for a view that declares no domains. Each resource read
and tool call the page relays comes here over HTTP and goes on to `dsh-todo mcp`
over stdio through the official Python client, which declares MCP Apps.

Used by tests/web/browser/test_mcp_app.py and scripts/mcp_app_screenshot.py.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
import threading
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TypeVar

from dsh_tool_todo.integrations.mcp._view import VIEW_MIME_TYPE
from tests.integrations.mcp_apps_client import apps_spawned

T = TypeVar("T")

NODE_DIR = Path(__file__).resolve().parents[2] / "node"
DSH_TODO = str(Path(sys.executable).parent / "dsh-todo")
LOOPBACK = "127.0.0.1"
# The spec's "restrictive default" for a view whose resource declares no csp, with the
# directives its CSP construction adds (frames, plugins, base URIs).
VIEW_POLICY = (
    "default-src 'none'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; media-src 'self' data:; connect-src 'none'; frame-src 'none'; "
    "object-src 'none'; base-uri 'self'"
)
ANSWER_SECONDS = 30
HOST_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>MCP App host</title>
<link rel="icon" href="data:,">
<style>body { margin: 16px; font: 14px system-ui, sans-serif; background: #f4f4f6; }</style>
</head><body>
<div id="views"></div>
<script type="application/json" id="settings">{settings}</script>
<script type="module" src="/host.js"></script>
</body></html>
"""


def bundle_bridge(out: Path) -> Path:
    """tests/node/mcp_app_host.mjs and the Apps SDK it imports, as one browser script."""
    assert shutil.which("node"), (
        "node is not installed: install Node.js >= 20 (apt-get install nodejs)"
    )
    # esbuild's command: a node script or, once its install step ran, its native binary
    esbuild = NODE_DIR / "node_modules" / ".bin" / "esbuild"
    ext_apps = NODE_DIR / "node_modules" / "@modelcontextprotocol" / "ext-apps"
    missing = f"not installed for the browser tests: run `npm ci --prefix {NODE_DIR}`"
    assert esbuild.exists(), f"esbuild is {missing}"
    assert ext_apps.is_dir(), f"@modelcontextprotocol/ext-apps is {missing}"
    command = [str(esbuild), "mcp_app_host.mjs", "--bundle", "--format=esm"]
    command += ["--platform=browser", "--log-level=warning", f"--outfile={out}"]
    subprocess.run(command, cwd=NODE_DIR, check=True, timeout=120)
    return out


class McpClientThread:
    """`dsh-todo mcp ARGS` held by the official client on an event loop of its own thread."""

    def __init__(self, args: list[str], errlog: Path) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._errlog = errlog.open("w", encoding="utf-8")
        self._opened = threading.Event()
        self.client: Any = None
        self._stop: asyncio.Event | None = None
        self._held = asyncio.run_coroutine_threadsafe(self._hold(args), self._loop)
        while not self._opened.wait(0.05):
            if self._held.done():
                self._held.result()  # the server or the client failed to start: say why
        assert self.client is not None

    async def _hold(self, args: list[str]) -> None:
        self._stop = asyncio.Event()
        async with apps_spawned(DSH_TODO, ["mcp", *args], errlog=self._errlog) as client:
            self.client = client
            self._opened.set()
            await self._stop.wait()

    def run(self, step: Callable[[Any], Awaitable[T]]) -> T:
        """``step(client)`` on the client's loop; its value."""
        return asyncio.run_coroutine_threadsafe(step(self.client), self._loop).result(
            ANSWER_SECONDS
        )

    def relay(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """The answer to a view's (or the host's) request, as it travels."""

        async def step(client: Any) -> Any:
            if method == "resources/read":
                return await client.read_resource(params["uri"])
            if method == "tools/call":
                return await client.call_tool(params["name"], params.get("arguments") or {})
            raise ValueError(f"this host relays resources/read and tools/call, not {method}")

        answer: dict[str, Any] = self.run(step).model_dump(
            by_alias=True, exclude_none=True, mode="json"
        )
        return answer

    def close(self) -> None:
        stop = self._stop
        if stop is not None:
            self._loop.call_soon_threadsafe(stop.set)
        try:
            self._held.result(ANSWER_SECONDS)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(ANSWER_SECONDS)
            self._loop.close()
            self._errlog.close()


def _serve(handler: type[BaseHTTPRequestHandler]) -> ThreadingHTTPServer:
    server = ThreadingHTTPServer((LOOPBACK, 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _handler(routes: dict[str, tuple[str, bytes, dict[str, str]]], relay: Any) -> type[Any]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass  # the test's output is the test's

        def _send(self, status: int, kind: str, body: bytes, headers: dict[str, str]) -> None:
            self.send_response(status)
            self.send_header("content-type", kind)
            self.send_header("content-length", str(len(body)))
            self.send_header("cache-control", "no-store")
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            if self.path not in routes:
                self._send(404, "text/plain", b"not here", {})
                return
            self._send(200, *routes[self.path])

        def do_POST(self) -> None:
            if self.path != "/relay" or relay is None:
                self._send(404, "text/plain", b"not here", {})
                return
            asked = json.loads(self.rfile.read(int(self.headers["content-length"])))
            try:
                answer = {"result": relay(asked["method"], asked.get("params") or {})}
            except Exception as error:  # the view is told, as a host would tell it
                answer = {"error": f"{type(error).__name__}: {error}"}
            self._send(200, "application/json", json.dumps(answer).encode(), {})

    return Handler


class AppHost:
    """The host page (one origin) and the view it frames (another), on one `dsh-todo mcp`."""

    def __init__(self, mcp: McpClientThread, bundle: Path, theme: str) -> None:
        self.mcp = mcp
        (tool,) = mcp.run(lambda client: client.list_tools()).tools
        self.tool = tool.model_dump(by_alias=True, exclude_none=True, mode="json")
        # As a host does: the view the tool names, read from the server.
        (content,) = mcp.relay("resources/read", {"uri": self.tool["_meta"]["ui"]["resourceUri"]})[
            "contents"
        ]
        assert content["mimeType"] == VIEW_MIME_TYPE
        view_headers = {"content-security-policy": VIEW_POLICY}
        self._view = _serve(
            _handler(
                {"/view": ("text/html; charset=utf-8", content["text"].encode(), view_headers)},
                None,
            )
        )
        view_url = f"http://{LOOPBACK}:{self._view.server_address[1]}/view"
        settings = json.dumps({"view": view_url, "theme": theme}).replace("<", "\\u003c")
        page = HOST_PAGE.replace("{settings}", settings).encode()
        script = bundle.read_bytes()
        routes = {
            "/": ("text/html; charset=utf-8", page, {}),
            "/host.js": ("text/javascript; charset=utf-8", script, {}),
        }
        self._host = _serve(_handler(routes, mcp.relay))
        self.url = f"http://{LOOPBACK}:{self._host.server_address[1]}/"

    def close(self) -> None:
        for server in (self._host, self._view):
            server.shutdown()
            server.server_close()


@contextmanager
def app_host(
    log_dir: Path, errlog: Path, bundle: Path, *, theme: str = "light"
) -> Iterator[AppHost]:
    """A host page on a fresh `dsh-todo mcp --log-dir LOG_DIR`, its stderr in ``errlog``."""
    mcp = McpClientThread(["--log-dir", str(log_dir)], errlog)
    try:
        host = AppHost(mcp, bundle, theme)
        try:
            yield host
        finally:
            host.close()
    finally:
        mcp.close()
