"""The web view's gate: every request must name the served address in its ``Host`` header (a DNS
rebinding page cannot), and, when a token is set, carry it; every answer gets the security headers.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterable
from urllib.parse import parse_qsl, quote, urlencode

from starlette.responses import RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..errors import UsageError

OLD_TOKEN_COOKIE = "dsh_todo_token"  # before cookies were per port; accepted for one release
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
SECURITY_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
]
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
_WITH_PORT = re.compile(r"(\[[^\]]+\]|[^:\[\]]+):[0-9]{1,5}")
_NAME = re.compile(r"(\[[^\]]+\]|[^:\[\]]+)(:[0-9]{1,5})?")
DEFAULT_PORTS = (80, 443)  # the ports http and https leave out of the Host header
# What --allow-host takes: a DNS name or IPv4 address, or an IPv6 address in brackets, each
# with a port or without; ASCII only, as a browser sends a name (punycode for others).
_ALLOWED = re.compile(
    r"(?:(?P<name>[a-z0-9_-]+(?:\.[a-z0-9_-]+)*\.?)|\[(?P<v6>[0-9a-f:.]+)\])"
    r"(?::(?P<port>[1-9][0-9]{0,4}))?",
    re.ASCII | re.IGNORECASE,
)
ALLOWED_FORMS = (
    "give name, name:port or [v6]:port (viewer.lan, proxy.lan:443, [fd00::1]:8765), with no "
    "scheme, path, space or wildcard"
)
ONE_HOST = "refused: the request must name one host, in one Host header"


def _plain(status: int, text: str) -> Response:
    return Response(text + "\n", status_code=status, media_type="text/plain")


def served_hosts(host: str, port: int, extra: Iterable[str] = ()) -> frozenset[str]:
    """The ``Host`` header values a request may carry when the app is served at ``host:port``.

    A loopback address also answers to the other loopback names; ``extra``
    adds names a proxy or a LAN address reaches it by (``name`` for the served
    port or a proxy's default one, ``name:port`` for a proxy's). A browser
    leaves out the port its scheme defaults to (80, 443), so a name reached on
    such a port is admitted without one too.

    >>> print(*sorted(served_hosts("127.0.0.1", 8765, ["viewer.lan", "proxy:443"])))
    127.0.0.1:8765 [::1]:8765 localhost:8765 proxy proxy:443 viewer.lan viewer.lan:8765

    A name no ``Host`` header can carry is refused (:func:`check_allowed_hosts`).
    """
    extra = check_allowed_hosts(extra, "extra_hosts")
    bracketed = f"[{host}]" if ":" in host and not host.startswith("[") else host
    names = {bracketed.lower()}
    if is_loopback(host):
        names.update(LOOPBACK_NAMES)
    hosts = {f"{name}:{port}" for name in names}
    if port in DEFAULT_PORTS:
        hosts.update(names)
    for name in extra:
        named = _WITH_PORT.fullmatch(name)
        if named is None:  # the served port, or a proxy's default port (no port in Host)
            hosts.update({f"{name.lower()}:{port}", name.lower()})
        else:
            hosts.add(name.lower())
            if int(name.rpartition(":")[2]) in DEFAULT_PORTS:
                hosts.add(named.group(1).lower())
    return frozenset(hosts)


def check_allowed_hosts(values: Iterable[str], said: str) -> list[str]:
    """``values``, once each is known to be a name a ``Host`` header can carry; else
    ``UsageError`` naming the value as ``said`` and the accepted forms (such a name would
    admit nothing, or not what was meant)."""
    import ipaddress

    if isinstance(values, str):
        raise UsageError(f"{said} takes a list of names, not one string ({values!r})")
    names = list(values)
    for value in names:
        allowed = _ALLOWED.fullmatch(value) if isinstance(value, str) else None
        fits = allowed is not None and int(allowed["port"] or 1) < 65536
        if fits and allowed is not None and allowed["v6"] is not None:
            try:
                ipaddress.IPv6Address(allowed["v6"])
            except ValueError:
                fits = False
        if not fits:
            raise UsageError(
                f"{said} {value!r} names no host a Host header carries: {ALLOWED_FORMS}"
            )
    return names


def is_loopback(host: str) -> bool:
    """Whether ``host`` is an address (or ``localhost``) only this machine can reach."""
    import ipaddress

    name = host.strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def token_cookie(port: int) -> str:
    """The token cookie's name: one per port, since a browser keeps cookies per host, not port."""
    return f"dsh_todo_token_{port}"


def cookie_values(header: str, name: str) -> list[str]:
    """The values of cookie ``name`` in a ``Cookie`` header, parsed as browsers send it.

    RFC 6265 (section 5.4): pairs split on ``;``, each on its first ``=``.
    Whatever else the header holds (spaces, JSON, a name without a value,
    quotes) belongs to other cookies and is passed over, never a reason to
    drop the rest.

    >>> cookie_values('a=b c; {"x": 1}; flag; t="v=1"; t=w', "t")
    ['v=1', 'w']
    """
    values = []
    for pair in header.split(";"):
        key, equals, value = pair.partition("=")
        if equals and key.strip() == name:
            value = value.strip()
            if len(value) >= 2 and value[0] == value[-1] == '"':
                value = value[1:-1]
            values.append(value)
    return values


def new_token() -> str:
    """A token for a server bound beyond loopback: printed at start, required on every request."""
    return secrets.token_urlsafe(24)


class Guard:
    """ASGI middleware: refuse foreign ``Host`` headers and missing tokens; add security headers."""

    def __init__(self, app: ASGIApp, hosts: frozenset[str], token: str | None, cookie: str) -> None:
        self.app = app
        self.hosts = hosts
        self.token = token
        self.cookie = cookie

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        # Judged whole: with two Host headers (or one listing two names), a proxy and this
        # server may each read another one.
        named = [value for key, value in scope["headers"] if key == b"host"]
        if len(named) > 1 or b"," in b"".join(named):
            await _plain(400, ONE_HOST)(scope, receive, send)
            return
        headers = dict(scope["headers"])
        host = headers.get(b"host", b"").decode("latin-1").lower()
        if host not in self.hosts:
            await _plain(403, _refused_host(host))(scope, receive, send)
            return
        if self.token is not None:
            verdict = self._check_token(scope, headers)
            if verdict is not None:
                await verdict(scope, receive, send)
                return

        # Static files are revalidated on each load (a 304 when unchanged), so a page never
        # runs a script older than the server it talks to.
        extra = [*SECURITY_HEADERS]
        if scope["path"].startswith("/static/"):
            extra.append((b"cache-control", b"no-cache"))

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        await self.app(scope, receive, send_with_headers)

    def _check_token(self, scope: Scope, headers: dict[bytes, bytes]) -> ASGIApp | None:
        """``None`` when the request carries the token; else the response to give."""
        assert self.token is not None
        expected = self.token.encode()
        authorization = headers.get(b"authorization", b"")
        if authorization[:7].lower() == b"bearer " and secrets.compare_digest(
            authorization[7:], expected
        ):
            return None
        cookies = headers.get(b"cookie", b"").decode("latin-1")
        for name in (self.cookie, OLD_TOKEN_COOKIE):
            for value in cookie_values(cookies, name):
                if secrets.compare_digest(value.encode("latin-1"), expected):
                    return None
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"))
        given = [value for key, value in query if key == "token"]
        if given and secrets.compare_digest(given[0].encode(), expected):
            # Trade the token in the address for a cookie, so it leaves the address bar.
            rest = urlencode([(key, value) for key, value in query if key != "token"])
            raw = scope.get("raw_path")  # as sent: decoding would change names with escapes
            path = raw.decode("latin-1") if raw else quote(scope["path"])
            path = "/" + path.lstrip("/")  # "//host/..." would send the browser to that host
            target = path + (f"?{rest}" if rest else "")
            response = RedirectResponse(target, status_code=303)
            response.set_cookie(self.cookie, self.token, httponly=True, samesite="strict", path="/")
            return response
        return _plain(401, "refused: this server needs the token it printed at start")


def _refused_host(host: str) -> str:
    if not _NAME.fullmatch(host) or len(host) > 260 or not host.isprintable():
        return "refused: the Host header does not name this server"
    return (
        f"refused: the Host header ({host}) does not name this server; if clients reach it by "
        f"that name, restart it with --allow-host {host}"
    )
