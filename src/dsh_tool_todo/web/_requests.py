"""The web view's request routes: filing off unless the server is started with ``--requests``.

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

Without ``--requests`` the token route answers ``{"token": null}`` (:func:`off_routes`): the
page asks it on every session page, and a 404 there would be a console error in every browser
watching a server that files no requests. The read route is on every server
(:class:`RequestReads`): it files nothing, and keeps the view's guards as every read does; the
page draws what it gives read-only there.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import time
from collections import deque
from collections.abc import Awaitable, Callable
from os import PathLike
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from ..errors import UsageError
from ..plans.fleet import turn_asked, turn_window
from ..protocols import LogReader
from ..stores.requests import PlanRequests
from ._routes import _error, _json

__all__: list[str] = []

HEADER = "x-dsh-todo-request"
REQUESTS = "/api/sessions/{name}/requests"
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


async def _no_filing(request: Request) -> Response:
    """A server that files nothing answers a filing as any path it does not serve (a 405 would
    say the route is there)."""
    raise HTTPException(404)


def request_routes(
    plans: LogReader,
    hosts: frozenset[str],
    *,
    source: object,
    requests: bool | str | PathLike[str],
    inboxes: str | PathLike[str] | None,
) -> list[BaseRoute]:
    """The request routes of ``create_app``'s arguments (there, what they mean): the inboxes are
    in ``source`` given as a directory or URL, else ``inboxes``, else ``requests`` given as one.
    """
    if isinstance(source, (str, PathLike)):
        inboxes = source
    elif inboxes is None and isinstance(requests, (str, PathLike)):
        inboxes = requests
    target = None if inboxes is None else os.fspath(inboxes)
    if not requests:
        return off_routes(target, plans)
    if target is None:
        raise UsageError(
            "requests=True needs the source as a directory or a postgresql:// URL; with a "
            "reader, pass requests= the directory or URL it reads"
        )
    named = target if isinstance(requests, bool) else os.fspath(requests)
    return RequestRoutes(named, plans, hosts).routes()


def off_routes(target: str | None, plans: LogReader) -> list[BaseRoute]:
    """The routes of a server started without ``--requests``: a token route that gives none,
    and the read route (:class:`RequestReads`) when the sessions' inboxes can be found."""
    reads = RequestReads(target, plans).routes()
    filing = [Route(REQUESTS, _no_filing, methods=["POST"])] if reads else []
    return [Route("/api/requests/token", _no_token, methods=["GET"]), *reads, *filing]


class RequestReads:
    """The read route of the source ``target`` read by ``plans``: how a session's requests
    stand, ``PlanRequests.aread()`` with what was asked in the current turn beside it
    (``"asked"``, the read ``dsh-todo show`` makes). ``target`` may be ``None`` for a reader
    of a directory (each session's inbox is beside its file); with another reader and no
    ``target`` there is no inbox to read, and no route."""

    def __init__(self, target: str | None, plans: LogReader) -> None:
        self.target = target
        self.plans = plans

    def routes(self) -> list[BaseRoute]:
        if self.target is None and not isinstance(self.plans, _LogFiles):
            return []
        return [Route(REQUESTS, self.read, methods=["GET"])]

    async def _of(self, name: str) -> PlanRequests:
        """The requests of session ``name``; :class:`SessionNotFound` (the view's 404) for a
        session the view does not serve, so no message names a path of the server."""
        await self.plans.snapshot(name)
        key = self.plans.owner_of(name)
        if isinstance(self.plans, _LogFiles) and (key is None or self.target is None):
            # a log named by hand (`Bob Smith.jsonl`): its file, not an owner's of that key;
            # or no source named: each file's inbox is beside it
            return PlanRequests(str(self.plans.path_of(name)))
        assert self.target is not None  # else routes() made no route
        return PlanRequests(self.target, key if key is not None else name)

    async def read(self, request: Request) -> Response:
        name = request.path_params["name"]
        # in a thread: opening a session's inbox and log connects anew, without waiting (some
        # 20 ms on PostgreSQL), and every page asks at each plan change
        found = await asyncio.to_thread((await self._of(name)).read)
        # read after the inbox: a request taken between the two shows twice, never not at all
        events, _ = await turn_window(self.plans, name, asked=True)
        return _json({**found.as_json(), "asked": turn_asked(events)})


class RequestRoutes(RequestReads):
    """The routes of the request channel for the source ``target`` read by ``plans``."""

    def __init__(self, target: str, plans: LogReader, hosts: frozenset[str]) -> None:
        super().__init__(target, plans)
        self.hosts = hosts
        self.token = secrets.token_urlsafe(24)
        self._recent: deque[float] = deque()

    def routes(self) -> list[BaseRoute]:
        return [
            Route("/api/requests/token", self.give_token, methods=["GET"]),
            *super().routes(),
            Route(REQUESTS, self.file, methods=["POST"]),
            Route(
                "/api/sessions/{name}/requests/{ident}/withdraw", self.withdraw, methods=["POST"]
            ),
        ]

    async def give_token(self, request: Request) -> Response:
        return _json({"token": self.token, "header": HEADER})

    async def file(self, request: Request) -> Response:
        return await self._counted(request, self._file)

    async def withdraw(self, request: Request) -> Response:
        return await self._counted(request, self._withdraw)

    async def _file(self, request: Request) -> Response:
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
            # in a thread: filing waits on the inbox's lock, which any filer may hold
            filed = await asyncio.to_thread(requests.file, kind, content, by=by)
        except UsageError as error:
            return _error(400, _without_paths(str(error), requests))
        return _json(filed.as_json(), 201)

    async def _withdraw(self, request: Request) -> Response:
        body = await _body(request, empty_ok=True)
        if isinstance(body, Response):
            return body
        requests = await self._of(request.path_params["name"])
        by = body.get("by", "web view")
        try:
            await asyncio.to_thread(
                requests.withdraw,
                request.path_params["ident"],
                by=by if isinstance(by, str) else "",
            )
        except UsageError as error:
            return _error(400, _without_paths(str(error), requests))
        return _json({"withdrawn": request.path_params["ident"]})

    def _refused(self, request: Request) -> Response | None:
        given = request.headers.getlist(HEADER)
        if len(given) != 1 or not secrets.compare_digest(given[0].encode(), self.token.encode()):
            return _error(403, f"refused: a request needs this server's request token in {HEADER}")
        origin = request.headers.getlist("origin")
        scheme, _, where = origin[0].partition("://") if len(origin) == 1 else ("", "", "")
        if scheme.lower() not in ("http", "https") or where.lower() not in self.hosts:
            return _error(403, "refused: a request must come from this server's own page (Origin)")
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > MAX_BODY:  # said before a byte is read
            return _error(413, f"a request is at most {MAX_BODY} bytes")
        return None

    async def _counted(
        self, request: Request, handle: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        """``handle`` of a request the guards let by, counted toward the rate from before it
        runs (requests handled at once count each other) until it is refused, if it is."""
        refused = self._refused(request)
        if refused is not None:
            return refused
        now = time.monotonic()
        while self._recent and now - self._recent[0] > RATE_WINDOW:
            self._recent.popleft()
        if len(self._recent) >= RATE:
            return _error(429, f"refused: at most {RATE} requests a minute reach the agent")
        self._recent.append(now)
        response: Response | None = None
        try:
            response = await handle(request)
        finally:
            if response is None or response.status_code >= 300:
                with contextlib.suppress(ValueError):  # out of the window meanwhile
                    self._recent.remove(now)  # refused ones do not count toward the rate
        return response


def _without_paths(message: str, requests: PlanRequests) -> str:
    """``message`` without the served directory's path: no answer names a path of the server
    (an inbox that is no regular file is named by the store for whoever runs it)."""
    source = os.fspath(requests.source)
    where = source if os.path.isdir(source) else os.path.dirname(source)
    for root in {where, os.path.realpath(where)}:
        if root:
            message = message.replace(root.rstrip(os.sep) + os.sep, "")
    return message


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
