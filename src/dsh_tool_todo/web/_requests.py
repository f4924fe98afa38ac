"""The web view's request route, off unless the server is started with ``--requests``.

A person files a request against a session's plan from the page; the agent's own writer
takes it (docs/requests.md). Nothing here writes a log: a request goes to the session's
inbox. The route keeps every guard of the view (the Host check, the view's token when it
has one) and adds its own, since it is the one route that changes state:

- a per-server request token, made at start even on loopback, handed to the page by
  ``GET /api/requests/token`` (same-origin reads only: no CORS) and required in the
  ``X-Dsh-Todo-Request`` header of every request that files or withdraws: a cookie alone
  never does, so a cross-site form cannot post one;
- the ``Origin`` header must name the served address;
- a body of at most :data:`MAX_BODY` bytes, JSON; at most :data:`RATE` requests per
  :data:`RATE_WINDOW` seconds per server (429 past it).

Without ``--requests`` only the token route exists (:func:`off_routes`), answering
``{"token": null}``: the page asks it on every session page, and a 404 there would be a
console error in every browser watching a server that files no requests.
"""

from __future__ import annotations

import json
import secrets
import time
from collections import deque
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from ..errors import UsageError
from ..protocols import LogReader
from ..stores.requests import PlanRequests
from ._routes import _error, _json

__all__: list[str] = []

HEADER = "x-dsh-todo-request"
MAX_BODY = 4096
RATE = 30
RATE_WINDOW = 60.0
KINDS = ("done", "reopen", "remove", "add", "note")


@runtime_checkable
class _LogFiles(Protocol):
    """A reader whose sessions are files (a directory's): each session's log by name."""

    def path_of(self, name: str) -> Path: ...


async def _no_token(request: Request) -> Response:
    return _json({"token": None, "header": HEADER})


def off_routes() -> list[BaseRoute]:
    """The routes of a server started without ``--requests``: a token route that gives none."""
    return [Route("/api/requests/token", _no_token, methods=["GET"])]


class RequestRoutes:
    """The routes of the request channel for the source ``target`` read by ``plans``."""

    def __init__(self, target: str, plans: LogReader, hosts: frozenset[str]) -> None:
        self.target = target
        self.plans = plans
        self.hosts = hosts
        self.token = secrets.token_urlsafe(24)
        self._recent: deque[float] = deque()

    def routes(self) -> list[BaseRoute]:
        return [
            Route("/api/requests/token", self.give_token, methods=["GET"]),
            Route("/api/sessions/{name}/requests", self.read, methods=["GET"]),
            Route("/api/sessions/{name}/requests", self.file, methods=["POST"]),
            Route(
                "/api/sessions/{name}/requests/{ident}/withdraw", self.withdraw, methods=["POST"]
            ),
        ]

    async def _of(self, name: str) -> PlanRequests:
        """The requests of session ``name``; :class:`SessionNotFound` (the view's 404) for a
        session the view does not serve, so no message names a path of the server."""
        await self.plans.snapshot(name)
        key = self.plans.owner_of(name)
        if key is None and isinstance(self.plans, _LogFiles):
            # a log named by hand (`Bob Smith.jsonl`): its file, not an owner's of that key
            return PlanRequests(str(self.plans.path_of(name)))
        return PlanRequests(self.target, key if key is not None else name)

    async def give_token(self, request: Request) -> Response:
        return _json({"token": self.token, "header": HEADER})

    async def read(self, request: Request) -> Response:
        found = await (await self._of(request.path_params["name"])).aread()
        return _json(found.as_json())

    async def file(self, request: Request) -> Response:
        refused = self._refused(request)
        if refused is not None:
            return refused
        body = await _body(request)
        if isinstance(body, Response):
            return body
        kind, content, by = body.get("kind"), body.get("content"), body.get("by", "web view")
        if kind not in KINDS:
            return _error(400, f"`kind` is one of {', '.join(KINDS)}")
        if not isinstance(content, str) or not isinstance(by, str):
            return _error(400, "`content` and `by` must be strings")
        requests = await self._of(request.path_params["name"])
        try:
            filed = await requests.afile(kind, content, by=by)
        except UsageError as error:
            return _error(400, str(error))
        self._counted()
        return _json(filed.as_json(), 201)

    async def withdraw(self, request: Request) -> Response:
        refused = self._refused(request)
        if refused is not None:
            return refused
        body = await _body(request, empty_ok=True)
        if isinstance(body, Response):
            return body
        requests = await self._of(request.path_params["name"])
        try:
            by = body.get("by", "web view")
            await requests.awithdraw(
                request.path_params["ident"], by=by if isinstance(by, str) else ""
            )
        except UsageError as error:
            return _error(400, str(error))
        self._counted()
        return _json({"withdrawn": request.path_params["ident"]})

    def _refused(self, request: Request) -> Response | None:
        given = request.headers.getlist(HEADER)
        if len(given) != 1 or not secrets.compare_digest(given[0].encode(), self.token.encode()):
            return _error(403, f"refused: a request needs this server's request token in {HEADER}")
        origin = request.headers.getlist("origin")
        if len(origin) != 1 or origin[0].partition("://")[2].lower() not in self.hosts:
            return _error(403, "refused: a request must come from this server's own page (Origin)")
        now = time.monotonic()
        while self._recent and now - self._recent[0] > RATE_WINDOW:
            self._recent.popleft()
        if len(self._recent) >= RATE:
            return _error(429, f"refused: at most {RATE} requests a minute reach the agent")
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > MAX_BODY:  # said before a byte is read
            return _error(413, f"a request is at most {MAX_BODY} bytes")
        return None

    def _counted(self) -> None:
        """One more request filed or withdrawn (refused ones do not count toward the rate)."""
        self._recent.append(time.monotonic())


async def _body(request: Request, *, empty_ok: bool = False) -> dict[str, Any] | Response:
    raw = b""
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > MAX_BODY:
            return _error(413, f"a request is at most {MAX_BODY} bytes")
    if not raw and empty_ok:
        return {}
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError):
        return _error(400, "the body must be a JSON object {kind, content}")
    if not isinstance(body, dict):
        return _error(400, "the body must be a JSON object {kind, content}")
    return body
