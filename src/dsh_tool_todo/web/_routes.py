"""The web view's endpoints: the page, the session list, a session's family, history tail page,
projection and streams; and what each error a reader raises answers.

Every answer is JSON with ``cache-control: no-store`` (the streams excepted); a query
parameter is taken once, in plain ASCII digits where it is a number, or refused with a 400
saying what it must be.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from ..errors import InvalidLog, SessionNotFound, StoreNotReady, StoreUnavailable
from ..protocols import Event, LogReader, SessionSummary
from ._fleet import SignalCache, family, unlisted_parents
from ._listhub import ListHub
from ._streams import (
    Timing,
    deciding_at,
    list_stream,
    plan_mark,
    plan_stream,
    projection_frame,
    shown_name,
    wire_stream,
)
from ._tree_stream import tree_stream
from ._wire_stream import WireStream, wire_format

__all__ = ["Views"]

STATIC = Path(__file__).parent / "static"
MAX_PAGE = 500  # events per tail page
MAX_SESSIONS = 1000  # rows per session list
MAX_SEQ = 2**62  # the largest seq a client may name (a PostgreSQL bigint holds it)

Handler = Callable[[Request, Exception], Awaitable[Response]]


def _json(payload: object, status: int = 200) -> Response:
    # ensure_ascii: model-written text may hold lone surrogates, which UTF-8 cannot carry.
    body = json.dumps(payload, ensure_ascii=True, separators=(",", ":"))
    return Response(
        body,
        status_code=status,
        media_type="application/json",
        headers={"cache-control": "no-store"},
    )


def _error(status: int, message: str) -> Response:
    return _json({"error": message}, status)


class _BadRequest(ValueError):
    pass


def _once(request: Request, key: str) -> str | None:
    """The query's one value of ``key``; :class:`_BadRequest` when it is given more than once
    (which one counts is not for a server to guess)."""
    values = request.query_params.getlist(key)
    if len(values) > 1:
        shown = [value[:40] for value in values[:3]]
        raise _BadRequest(f"give `{key}` once (got {len(values)}: {shown!r})")
    return values[0] if values else None


def _tree(request: Request, form: str | None) -> bool:
    """Whether the stream carries the session's sub-agents too (``tree=1``, with a ``format``)."""
    raw = _once(request, "tree")
    if raw is None or raw in ("", "0"):
        return False
    if raw != "1":
        raise _BadRequest(f"`tree` must be 1 or 0 (got {raw[:40]!r})")
    if form is None:
        raise _BadRequest(
            "`tree=1` goes with `format=ag-ui` or `format=ai-sdk`, the stream forms with "
            "sub-agents; this library's own frames carry one session's plan: open one stream "
            "per session"
        )
    return True


def _asked(request: Request, form: str | None) -> bool:
    """Whether this library's frames tell of request events too (``requests=1``): what the
    page refreshes its list of requests on. The ``format`` streams carry the list itself."""
    raw = _once(request, "requests")
    if raw is None or raw in ("", "0"):
        return False
    if raw != "1" or form is not None:
        raise _BadRequest(
            f"`requests` is 1 or 0, without `format` (got {raw[:40]!r}): the `format` streams "
            "carry what was asked in their plans"
        )
    return True


_MARK = re.compile(r"[0-9a-f]{12}|none")  # what a frame id says of its plan (_streams)
_DIGITS = re.compile(r"-?[0-9]{1,19}")  # ASCII only: int() also takes "+5", " 5", "5_0", "١٢"


def _number(raw: str, what: str, low: int, high: int, kind: str = "an integer") -> int:
    """``raw`` as an integer from ``low`` to ``high``, written in plain ASCII digits with at
    most a leading minus; :class:`_BadRequest` saying so otherwise."""
    if _DIGITS.fullmatch(raw) is None:
        raise _BadRequest(
            f"{what} must be {kind} from {low} to {high} in plain digits (got {raw[:40]!r})"
        )
    value = int(raw)
    if not low <= value <= high:
        raise _BadRequest(f"{what} must be {kind} from {low} to {high} (got {raw})")
    return value


def _int_param(request: Request, key: str, default: int | None, low: int, high: int) -> int | None:
    raw = _once(request, key)
    if raw is None or raw == "":
        return default
    return _number(raw, f"`{key}`", low, high)


def _row(
    row: SessionSummary, owner: str | None, found: list[dict[str, Any]] | None
) -> dict[str, Any]:
    """One :class:`~dsh_tool_todo.protocols.SessionSummary` as the list gives it; signals
    not yet known (``found`` is ``None``) are an empty list with ``signalsPending`` true."""
    return {
        "name": row.name,
        "owner": owner,
        "lastActivity": row.last_activity,
        "parent": row.parent,
        "lastSeq": row.last_seq,
        "workingOn": row.working_on,
        "signals": [] if found is None else found,
        "signalsPending": found is None,
        "progress": None if row.progress is None else row.progress.as_json(),
        "end": None if row.end is None else row.end.as_json(),
    }


class Views:
    """The endpoints over one reader, its list hub and its signal cache."""

    def __init__(self, plans: LogReader, hub: ListHub, health: SignalCache, timing: Timing) -> None:
        self.plans = plans
        self.hub = hub
        self.health = health
        self.timing = timing

    def routes(self) -> list[BaseRoute]:
        return [
            Route("/", self.page, methods=["GET"]),
            Route("/s/{name}", self.page, methods=["GET"]),
            Route("/api/sessions", self.sessions, methods=["GET"]),
            Route("/api/sessions/stream", self.sessions_stream, methods=["GET"]),
            Route("/api/sessions/{name}/events", self.events, methods=["GET"]),
            Route("/api/sessions/{name}/family", self.family, methods=["GET"]),
            Route("/api/sessions/{name}/projection", self.projection, methods=["GET"]),
            Route("/api/sessions/{name}/stream", self.stream, methods=["GET"]),
            Mount("/static", StaticFiles(directory=STATIC), name="static"),
        ]

    def page(self, request: Request) -> Response:
        return FileResponse(STATIC / "index.html", headers={"cache-control": "no-cache"})

    async def sessions(self, request: Request) -> Response:
        query = request.query_params.get("q", "")[:200]
        limit = _int_param(request, "limit", 200, 1, MAX_SESSIONS)
        assert limit is not None
        rows, total = await self.plans.sessions(query, limit)
        signals = await self.health.signals(rows)
        owner_of = self.plans.owner_of
        return _json(
            {
                "sessions": [
                    _row(row, owner_of(row.name), found)
                    for row, found in zip(rows, signals, strict=True)
                ],
                "total": total,
                "limit": limit,
                "unlistedParents": await unlisted_parents(self.plans, rows),
            }
        )

    async def sessions_stream(self, request: Request) -> Response:
        return list_stream(self.hub, request.query_params.get("q", "")[:200], self.timing)

    async def events(self, request: Request) -> Response:
        name = request.path_params["name"]
        before = _int_param(request, "before", None, 0, MAX_SEQ)
        limit = _int_param(request, "limit", 100, 1, MAX_PAGE)
        assert limit is not None
        raw_types = request.query_params.get("types")
        types = None if raw_types is None else frozenset(raw_types.split(","))
        page = await self.plans.tail(name, before=before, limit=limit, types=types)
        body = {
            "session": name,
            "owner": self.plans.owner_of(name),
            "events": page.events,
            "more": page.more,
            "cursor": page.cursor,
        }
        return _json(body)

    async def family(self, request: Request) -> Response:
        return _json(await family(self.plans, request.path_params["name"], MAX_SESSIONS))

    async def projection(self, request: Request) -> Response:
        return _json(projection_frame(await self.plans.snapshot(request.path_params["name"])))

    async def stream(self, request: Request) -> Response:
        name = request.path_params["name"]
        try:
            form = wire_format(request.query_params.getlist("format"))
        except ValueError as error:
            raise _BadRequest(str(error)) from None
        tree = _tree(request, form)
        asked = _asked(request, form)
        resume = request.headers.get("last-event-id") or _once(request, "after")
        after: int | None = None
        mark: str | None = None
        if resume:
            seq_text, _, mark = resume.partition(".")
            if mark and not _MARK.fullmatch(mark):
                seq_text = resume  # refused as no seq, with what a seq must be
            after = _number(seq_text, "`Last-Event-ID`", -1, MAX_SEQ, "a seq")
        now = await self.plans.snapshot(name)  # an unknown session is a 404, before streaming
        if tree:
            assert form is not None
            return tree_stream(self.plans, self.hub, WireStream(form, name), now, self.timing)
        if form is not None:
            return wire_stream(self.plans, WireStream(form, name), now, self.timing)
        resumed_on: Event | bool | None = True
        if after is not None and mark:
            found = await deciding_at(self.plans, name, after)
            # another plan at that seq now, or none found near it: the log was replaced
            same = not isinstance(found, bool) and plan_mark(found) == mark
            resumed_on = found if same else False
        return plan_stream(
            self.plans, name, now, after, self.timing, resumed_on=resumed_on, requests=asked
        )

    @staticmethod
    def errors() -> dict[Any, Handler]:
        """What each error a reader (or a request) raises answers."""
        return {
            SessionNotFound: _not_found,
            _BadRequest: _bad_request,
            InvalidLog: _invalid_log,
            StoreUnavailable: _unavailable,
        }


async def _not_found(request: Request, error: Exception) -> Response:
    return _error(404, f"no session {shown_name(error.args[0])} is served")


async def _bad_request(request: Request, error: Exception) -> Response:
    return _error(400, str(error))


async def _invalid_log(request: Request, error: Exception) -> Response:
    return _error(422, str(error))


async def _unavailable(request: Request, error: Exception) -> Response:
    if isinstance(error, StoreNotReady):  # it answers: the message says what to run
        return _error(503, str(error))
    return _error(503, f"the store cannot be reached: {error}")
