"""The web view's gate (``web/_guard.py``), through the app: the ``Host`` check, the token and
its cookie, the security headers on every answer."""

from __future__ import annotations

import asyncio
import html.parser
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.types import Message

from dsh_tool_todo.errors import UsageError
from dsh_tool_todo.web._guard import CSP
from dsh_tool_todo.web.app import create_app

from .conftest import ASGI_PORT, plan_write, run_requests, todo, write_log
from .test_app import get

TOKEN = "s3cret"
COOKIE = f"dsh_todo_token_{ASGI_PORT}"


@pytest.fixture
def logs(tmp_path: Path) -> Path:
    write_log(tmp_path / "alpha.jsonl", [plan_write(todo("A"))])
    return tmp_path


@pytest.mark.parametrize(
    "host", ["evil.example:8765", "127.0.0.1:9999", "attacker.test", "localhost.evil:8765", ""]
)
def test_a_host_header_not_naming_the_server_is_refused(logs: Path, host: str) -> None:
    async def call(client: httpx.AsyncClient) -> httpx.Response:
        return await client.get("/api/sessions", headers={"host": host})

    response: httpx.Response = run_requests(create_app(logs), call)

    assert response.status_code == 403
    assert "Host header" in response.text


@pytest.mark.parametrize("host", ["127.0.0.1:8765", "localhost:8765", "[::1]:8765"])
def test_loopback_names_of_the_served_port_are_accepted(logs: Path, host: str) -> None:
    async def call(client: httpx.AsyncClient) -> httpx.Response:
        return await client.get("/api/sessions", headers={"host": host})

    assert run_requests(create_app(logs), call).status_code == 200


class _Scripts(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.inline: list[str] = []
        self.sources: list[str] = []
        self.handlers: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handlers += [name for name, _ in attrs if name.startswith("on")]
        if tag == "script":
            source = dict(attrs).get("src")
            self._in_script = source is None
            if source:
                self.sources.append(source)

    def handle_data(self, data: str) -> None:
        if self._in_script and data.strip():
            self.inline.append(data)

    def handle_endtag(self, tag: str) -> None:
        self._in_script = False


@pytest.mark.parametrize("path", ["/", "/s/alpha"])
def test_pages_carry_a_strict_csp_and_no_inline_script(logs: Path, path: str) -> None:
    response = get(create_app(logs), path)
    scripts = _Scripts()
    scripts.feed(response.text)

    assert response.status_code == 200
    assert response.headers["content-security-policy"] == CSP
    assert "script-src 'self';" in CSP
    assert "unsafe-inline" not in CSP
    assert response.headers["x-content-type-options"] == "nosniff"
    assert scripts.inline == []
    assert scripts.handlers == []
    assert scripts.sources == ["/static/app.js"]


@pytest.mark.parametrize(
    "asset", ["/static/app.js", "/static/requests.js", "/static/app.css", "/static/favicon.svg"]
)
def test_static_assets_are_served_from_the_package(logs: Path, asset: str) -> None:
    response = get(create_app(logs), asset)

    assert response.status_code == 200
    assert response.headers["content-security-policy"] == CSP
    assert response.headers["cache-control"] == "no-cache"
    assert "etag" in response.headers


def test_with_a_token_every_request_must_carry_it(logs: Path) -> None:
    app = create_app(logs, token="s3cret")

    async def calls(client: httpx.AsyncClient) -> list[httpx.Response]:
        bare = await client.get("/api/sessions")
        wrong = await client.get("/api/sessions", headers={"authorization": "Bearer nope"})
        bearer = await client.get("/api/sessions", headers={"authorization": "Bearer s3cret"})
        traded = await client.get("/s/alice%2540example?token=s3cret&x=1")
        with_cookie = await client.get("/api/sessions")  # the client keeps the cookie
        return [bare, wrong, bearer, traded, with_cookie]

    bare, wrong, bearer, traded, with_cookie = run_requests(app, calls)

    assert (bare.status_code, wrong.status_code) == (401, 401)
    assert "token" in bare.text
    assert bearer.status_code == 200
    assert traded.status_code == 303
    assert traded.headers["location"] == "/s/alice%2540example?x=1"
    assert "httponly" in traded.headers["set-cookie"].lower()
    assert "samesite=strict" in traded.headers["set-cookie"].lower()
    assert with_cookie.status_code == 200


def test_trading_the_token_never_redirects_off_this_server(logs: Path) -> None:
    """``GET //evil.example/?token=T`` must not answer ``Location: //evil.example/``, which a
    browser reads as another host (an open redirect carrying the reader away)."""
    app = create_app(logs, token="s3cret")

    async def trade(client: httpx.AsyncClient) -> httpx.Response:
        url = client.base_url.copy_with(raw_path=b"//evil.example/?token=s3cret")
        return await client.get(url)

    traded = run_requests(app, trade)

    assert traded.status_code == 303
    assert traded.headers["location"] == "/evil.example/"


def test_the_bearer_scheme_is_matched_without_regard_to_case(logs: Path) -> None:
    """RFC 9110 11.1: an authentication scheme is case-insensitive (``bearer``, ``BEARER``)."""
    app = create_app(logs, token="s3cret")

    async def calls(client: httpx.AsyncClient) -> list[int]:
        return [
            (
                await client.get("/api/sessions", headers={"authorization": f"{scheme} s3cret"})
            ).status_code
            for scheme in ("bearer", "BEARER")
        ]

    assert run_requests(app, calls) == [200, 200]


@pytest.mark.parametrize(
    "cookie",
    [
        f"theme=dark mode; {COOKIE}={TOKEN}",  # a space in a value
        f'prefs={{"a": 1, "b": [2, 3]}}; {COOKIE}={TOKEN}',  # JSON
        f"flag; {COOKIE}={TOKEN}",  # a name-only cookie
        f'{COOKIE}={TOKEN}; broken="unterminated; other=a=b=c',
        f'a=\\x00\\; ;;; =nameless; {COOKIE}="{TOKEN}"',  # quoted, as RFC 6265 allows
        f"dsh_todo_token={TOKEN}; session=abc,def",  # the old name, kept for one release
    ],
)
def test_the_token_cookie_is_found_beside_cookies_a_strict_parser_refuses(
    logs: Path, cookie: str
) -> None:
    app = create_app(logs, token=TOKEN)

    response = get(app, "/api/sessions", headers={"cookie": cookie})

    assert response.status_code == 200, response.text


@pytest.mark.parametrize(
    "cookie",
    [
        "theme=dark mode",
        f"{COOKIE}=wrong; other={TOKEN}",
        f"dsh_todo_token_9999={TOKEN}",  # another port's server
        f"x{COOKIE}={TOKEN}",
        "",
    ],
)
def test_a_cookie_header_without_this_servers_token_is_refused(logs: Path, cookie: str) -> None:
    app = create_app(logs, token=TOKEN)

    response = get(app, "/api/sessions", headers={"cookie": cookie})

    assert response.status_code == 401


def test_each_port_trades_the_token_for_a_cookie_of_its_own(tmp_path: Path) -> None:
    write_log(tmp_path / "alpha.jsonl", [plan_write(todo("A"))])
    first = create_app(tmp_path, port=8001, token="one")
    second = create_app(tmp_path, port=8002, token="two")
    both = "dsh_todo_token_8001=one; dsh_todo_token_8002=two"

    async def trade(client: httpx.AsyncClient) -> httpx.Response:
        return await client.get("/?token=one")

    traded = run_requests(first, trade, host="127.0.0.1:8001")
    on_first = run_requests(
        first,
        lambda client: client.get("/api/sessions", headers={"cookie": both}),
        host="127.0.0.1:8001",
    )
    on_second = run_requests(
        second,
        lambda client: client.get("/api/sessions", headers={"cookie": both}),
        host="127.0.0.1:8002",
    )

    assert traded.status_code == 303
    assert traded.headers["set-cookie"].startswith("dsh_todo_token_8001=one;")
    assert (on_first.status_code, on_second.status_code) == (200, 200)


def test_a_refused_host_is_told_which_flag_admits_it(logs: Path) -> None:
    app = create_app(logs, host="0.0.0.0", port=ASGI_PORT, extra_hosts=["viewer.lan"])

    response = get(app, "/api/sessions", headers={"host": f"127.0.0.1:{ASGI_PORT}"})

    assert response.status_code == 403
    assert response.text == (
        f"refused: the Host header (127.0.0.1:{ASGI_PORT}) does not name this server; "
        f"if clients reach it by that name, restart it with --allow-host 127.0.0.1:{ASGI_PORT}\n"
    )


def test_a_hostile_host_header_is_not_echoed_raw(logs: Path) -> None:
    app = create_app(logs)

    response = get(app, "/api/sessions", headers={"host": "evil\x1b[31m.example:1" + "x" * 300})

    assert response.status_code == 403
    assert "\x1b" not in response.text
    assert len(response.text) < 400


# A browser leaves the scheme's default port out of Host (`https://proxy.lan/` sends
# `Host: proxy.lan`), and a proxy passes it on as it came.
@pytest.mark.parametrize(
    ("port", "allowed", "host"),
    [
        (8765, ["proxy.lan:443"], "proxy.lan"),
        (8765, ["proxy.lan:80"], "proxy.lan"),
        (8765, ["viewer.lan"], "viewer.lan"),
        (8765, ["viewer.lan"], "viewer.lan:8765"),
        (80, [], "127.0.0.1"),
        (80, [], "localhost"),
        (443, [], "[::1]"),
    ],
)
def test_a_host_without_a_port_is_admitted_where_the_name_is_served_on_a_default_port(
    logs: Path, port: int, allowed: list[str], host: str
) -> None:
    async def call(client: httpx.AsyncClient) -> httpx.Response:
        return await client.get("/api/sessions", headers={"host": host})

    app = create_app(logs, port=port, extra_hosts=allowed)
    assert run_requests(app, call).status_code == 200


@pytest.mark.parametrize(
    ("port", "allowed", "host"),
    [
        (8765, ["proxy.lan:8443"], "proxy.lan"),  # not a default port: the browser sends it
        (8765, [], "127.0.0.1"),  # served on 8765, so a portless Host means another port
        (8765, ["viewer.lan"], "viewer.lan:9999"),
        (80, ["proxy.lan:443"], "evil.example"),
    ],
)
def test_a_host_without_a_port_or_on_another_port_is_still_refused(
    logs: Path, port: int, allowed: list[str], host: str
) -> None:
    async def call(client: httpx.AsyncClient) -> httpx.Response:
        return await client.get("/api/sessions", headers={"host": host})

    response = run_requests(create_app(logs, port=port, extra_hosts=allowed), call)
    assert response.status_code == 403
    assert f"restart it with --allow-host {host}" in response.text


def asgi_get(app: Any, headers: list[tuple[bytes, bytes]]) -> tuple[int, bytes]:
    """The status and body of ``GET /api/sessions`` with ``headers`` exactly as a server hands
    them to the app (a client library would merge or drop repeated ones)."""
    sent: list[Message] = []
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": "/api/sessions",
        "raw_path": b"/api/sessions",
        "query_string": b"",
        "root_path": "",
        "headers": headers,
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", ASGI_PORT),
    }

    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Message) -> None:
        sent.append(message)

    async def main() -> None:
        async with app.router.lifespan_context(app):
            await app(scope, receive, send)

    asyncio.run(main())
    return sent[0]["status"], b"".join(message.get("body", b"") for message in sent[1:])


SERVED = f"127.0.0.1:{ASGI_PORT}".encode()


@pytest.mark.parametrize(
    "hosts",
    [
        [b"evil.example", SERVED],  # the last one names the server
        [SERVED, b"evil.example"],
        [SERVED, SERVED],
        [SERVED + b", evil.example"],  # one header, two names
        [b"evil.example, " + SERVED],
        [SERVED + b","],
    ],
)
def test_a_request_naming_more_than_one_host_is_refused(logs: Path, hosts: list[bytes]) -> None:
    headers = [(b"host", host) for host in hosts] + [(b"accept", b"*/*")]

    status, body = asgi_get(create_app(logs), headers)

    assert status == 400
    assert body == b"refused: the request must name one host, in one Host header\n"


def test_one_host_header_among_others_is_judged_as_before(logs: Path) -> None:
    assert asgi_get(create_app(logs), [(b"accept", b"*/*"), (b"host", SERVED)])[0] == 200
    assert asgi_get(create_app(logs), [(b"host", b"evil.example")])[0] == 403


@pytest.mark.parametrize(
    "allowed",
    [
        "",
        " ",
        "http://viewer.lan",
        "viewer.lan/",
        "viewer.lan/path",
        "viewer lan",
        " viewer.lan",
        "viewer.lan:0",
        "viewer.lan:99999",
        "viewer.lan:abc",
        "viewer.lan:",
        "viewer.lan:+80",
        "viewer.lan:٨٠",  # non-ASCII digits
        "*",
        "*.lan",
        "user@viewer.lan",
        "::1",  # a v6 address is bracketed in a Host header
        "[::1",
        "[not-v6]:80",
        "viewer..lan",
        "viewér.lan",
        "viewer.lan\n",
    ],
)
def test_an_allowed_host_that_no_host_header_can_carry_is_refused(logs: Path, allowed: str) -> None:
    with pytest.raises(UsageError, match=r"give name, name:port or \[v6\]:port"):
        create_app(logs, extra_hosts=["viewer.lan", allowed])


def test_allowed_hosts_given_as_one_string_are_refused(logs: Path) -> None:
    with pytest.raises(UsageError, match="extra_hosts takes a list of names, not one string"):
        create_app(logs, extra_hosts="viewer.lan")


@pytest.mark.parametrize(
    ("allowed", "host"),
    [
        ("viewer.lan", "viewer.lan"),
        ("Viewer.LAN:8443", "viewer.lan:8443"),
        ("viewer.lan.", "viewer.lan.:8765"),
        ("192.168.1.20:8765", "192.168.1.20:8765"),
        ("[fd00::1]:8765", "[fd00::1]:8765"),
        ("[fd00::1]", "[fd00::1]"),
        ("my_host-1", "my_host-1:8765"),
    ],
)
def test_allowed_hosts_in_each_accepted_form_are_admitted(
    logs: Path, allowed: str, host: str
) -> None:
    app = create_app(logs, port=ASGI_PORT, extra_hosts=[allowed])

    assert asgi_get(app, [(b"host", host.encode())])[0] == 200
