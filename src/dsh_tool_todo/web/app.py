"""The read-only web view: session pages, the history tail page and the projection push stream.

:func:`create_app` builds a Starlette app over a :class:`~dsh_tool_todo.protocols.LogReader`.
It only answers ``GET`` (and ``HEAD``): nothing it serves can change a log.
The wire format is this library's own, documented in ``docs/web.md``:

- ``GET /api/sessions`` — the session list (name, last activity, progress, parent,
  health signals of the current turn);
- ``GET /api/sessions/{name}/family`` — a session's parent and the sessions linked under it;
- ``GET /api/sessions/stream?q=TEXT`` — Server-Sent Events, one ``changed`` frame
  when rows of the list filtered by ``q`` may have changed (the page then asks again);
- ``GET /api/sessions/{name}/events?before=SEQ&limit=N`` — the history tail page,
  read from the end of the log;
- ``GET /api/sessions/{name}/projection`` — the ``todos`` projection now;
- ``GET /api/sessions/{name}/stream`` — Server-Sent Events, one ``projection``
  frame per change of the plan, the seq as the event id, resumable with
  ``Last-Event-ID``; ``?format=ag-ui`` or ``?format=ai-sdk`` gives the same
  changes as AG-UI events or AI SDK UI message chunks (``_wire_stream``).

Every request must name the served address in its ``Host`` header (a DNS
rebinding page cannot), and, when a token is set, carry it. Pages load no
inline script, under a strict Content-Security-Policy; model-written text is
only ever set as text by the page script.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Collection
from pathlib import Path
from typing import Any

from dsh_tool_todo.errors import OwnerNameError

from ..errors import missing_extra

try:
    from sse_starlette import EventSourceResponse, ServerSentEvent
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import FileResponse, Response
    from starlette.routing import Mount, Route
    from starlette.staticfiles import StaticFiles
except ImportError as error:
    raise missing_extra("the web view", "web", error) from error

from ..core.contract import EVENT_TYPE
from ..core.projection import PLAN_EVENTS, TodosProjection, checked_deciding
from ..errors import InvalidLog, LogReplaced, SessionNotFound, StoreNotReady, StoreUnavailable
from ..plans.checklist import escape_content
from ..protocols import Event, LogReader, Snapshot
from ..stores import open_reader
from ..stores.jsonl import JsonlReader
from ..stores.owners import owner_key
from ._fleet import SignalCache, family, unlisted_parents
from ._guard import Guard, cookie_values, is_loopback, new_token, served_hosts, token_cookie
from ._listhub import ListHub
from ._wire_stream import SEP as WIRE_SEP
from ._wire_stream import WireStream, wire_format

STATIC = Path(__file__).parent / "static"
MAX_PAGE = 500  # events per tail page
MAX_SESSIONS = 1000  # rows per session list
FIRST_LIST = 200  # rows of the list the page asks for first (static/app.js), read at start
MAX_REPLAY = 10_000  # events a resume may replay; a client further behind gets a snapshot
SHOWN_NAME = 80  # characters of a session name an error message quotes
MAX_SEQ = 2**62  # the largest seq a client may name (a PostgreSQL bigint holds it)
LIST_GAP = 0.1  # seconds between two rings of one list stream: a busy fleet rings at most 10/s


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


def _int_param(request: Request, key: str, default: int | None, low: int, high: int) -> int | None:
    raw = _once(request, key)
    if raw is None or raw == "":
        return default
    return _number(raw, f"`{key}`", low, high)


def _once(request: Request, key: str) -> str | None:
    """The query's one value of ``key``; :class:`_BadRequest` when it is given more than once
    (which one counts is not for a server to guess)."""
    values = request.query_params.getlist(key)
    if len(values) > 1:
        shown = [value[:40] for value in values[:3]]
        raise _BadRequest(f"give `{key}` once (got {len(values)}: {shown!r})")
    return values[0] if values else None


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


class _BadRequest(ValueError):
    pass


def projection_frame(snapshot_or_event: Snapshot | Event) -> dict[str, Any]:
    """The ``todos`` projection as a push frame: its state version, the seq it reflects, the plan.

    >>> projection_frame({"seq": 4, "type": "turn/start", "data": {}})
    {'key': 'todos', 'stateVersion': 2, 'seq': 4, 'cause': 'turn/start', 'plan': None}
    """
    if isinstance(snapshot_or_event, Snapshot):
        deciding = snapshot_or_event.deciding
        plan = None
        if deciding is not None and deciding["type"] == EVENT_TYPE:
            plan = deciding["data"]["todos"]
        return {
            "key": "todos",
            "stateVersion": TodosProjection.state_version,
            "seq": snapshot_or_event.last_seq,
            "cause": "snapshot",
            "plan": plan,
            "decidedBy": None
            if deciding is None
            else {
                "seq": deciding["seq"],
                "type": deciding["type"],
            },
        }
    event = snapshot_or_event
    return {
        "key": "todos",
        "stateVersion": TodosProjection.state_version,
        "seq": event["seq"],
        "cause": event["type"],
        "plan": event["data"]["todos"] if event["type"] == EVENT_TYPE else None,
    }


def _sse(frame: dict[str, Any]) -> ServerSentEvent:
    return ServerSentEvent(
        json.dumps(frame, ensure_ascii=True, separators=(",", ":")),
        event="projection",
        id=str(frame["seq"]),
    )


def _shown_name(name: object) -> str:
    """A session name as a message quotes it: at most :data:`SHOWN_NAME` characters of it,
    controls and bidi overrides escaped (a URL can name anything, of any length).
    """
    text = name if isinstance(name, str) else repr(name)
    if len(text) <= SHOWN_NAME:
        return f"'{escape_content(text)}'"
    return f"'{escape_content(text[:SHOWN_NAME])}'... ({len(text)} characters)"


@contextlib.asynccontextmanager
async def _closing(events: AsyncIterator[Event]) -> AsyncIterator[AsyncIterator[Event]]:
    """``events``, closed on the way out (a reader's ``follow`` is an async generator that holds
    its log open: left to the garbage collector, it would close only when collected)."""
    try:
        yield events
    finally:
        close = getattr(events, "aclose", None)
        if close is not None:
            await close()


def _fatal_message(name: str, error: Exception) -> tuple[str, str]:
    """What a stream's closing error says, and its cause (``deleted``, ``invalid``, ``io``)."""
    if isinstance(error, SessionNotFound):  # it carries only the name: say what happened
        return f"session {_shown_name(name)}: its log was deleted", "deleted"
    return str(error), "invalid" if isinstance(error, InvalidLog) else "io"


def _wire_response(
    plans: LogReader,
    form: WireStream,
    first: Snapshot,
    retry_ms: int,
    *,
    ping: float,
    send_timeout: float,
) -> Response:
    """The session stream in another protocol's form (``?format=``): see ``_wire_stream``.

    Every connection, a resumed one too, opens with the plan as it is: each
    form replaces the whole plan per frame, so the current one is all a
    client that missed steps needs, and a new connection is a new AG-UI run
    or AI SDK message that must be given it anyway.
    """
    name = form.name

    async def frames() -> AsyncIterator[ServerSentEvent]:
        hello = f"dsh-todo {form.format} stream"
        yield ServerSentEvent(comment=hello, retry=retry_ms, sep=WIRE_SEP)
        snapshot = first
        try:
            for frame in form.opening(snapshot):
                yield frame
            while True:
                try:
                    # closed at once when the client goes: the follower holds its log open
                    following = plans.follow(name, after=snapshot.last_seq, since=snapshot)
                    async with _closing(following) as events:
                        async for event in events:
                            if event["type"] in PLAN_EVENTS:
                                where = f"session {name!r}, seq {event['seq']}"
                                for frame in form.change(checked_deciding(event, where)):
                                    yield frame
                except LogReplaced:
                    snapshot = await plans.snapshot(name)
                    for frame in form.snapshot(snapshot):
                        yield frame
        except (InvalidLog, SessionNotFound, OSError) as error:
            for frame in form.fatal(*_fatal_message(name, error)):
                yield frame

    headers = {"x-vercel-ai-ui-message-stream": "v1"} if form.format == "ai-sdk" else None
    return EventSourceResponse(
        frames(), ping=ping, send_timeout=send_timeout, sep=WIRE_SEP, headers=headers
    )


def create_app(
    source: LogReader | str | Path,
    *,
    host: str = "127.0.0.1",
    port: int = 8765,
    extra_hosts: Collection[str] = (),
    token: str | None = None,
    ping: float = 15.0,
    retry_ms: int = 1000,
    send_timeout: float = 30.0,
    warm_list: bool = False,
) -> Starlette:
    """The web view of ``source`` (a :class:`LogReader`, a directory, or a ``postgresql://`` URL).

    ``host`` and ``port`` are the address it is served at: requests naming
    any other in their ``Host`` header are refused. With ``token``, every
    request must carry it (``Authorization: Bearer``, the cookie the page
    gets, or ``?token=`` once). ``ping`` is the keep-alive period of streams
    in seconds, ``retry_ms`` the reconnect delay they advise. With ``warm_list`` (what
    ``dsh-todo serve`` does), a reader that can hold its list's index (a watched JSONL
    directory) keeps it between lists, and the page's first list is read once at start.
    """
    plans = open_reader(source) if isinstance(source, (str, Path)) else source

    def owner_of(name: str) -> str | None:
        """The owner key a JSONL file name encodes (OwnerRegistry layout), when exact."""
        if not isinstance(plans, JsonlReader):
            return None
        try:
            return owner_key(name)
        except OwnerNameError:
            return None

    hub = ListHub(plans)
    health = SignalCache(plans, on_late=hub.ring)

    async def warm() -> None:
        """Hold the list's index (a reader that can) and read the page's first list once, at
        start: the first page then finds its rows' summaries and signals known."""
        hold = getattr(plans, "hold_list", None) if warm_list else None
        if hold is None:
            return
        hold()
        with contextlib.suppress(Exception):  # the first list asked for says what is wrong
            rows, _ = await plans.sessions("", FIRST_LIST)
            await health.signals(rows)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        warming = asyncio.get_running_loop().create_task(warm())
        try:
            yield
        finally:
            warming.cancel()
            await asyncio.gather(warming, return_exceptions=True)
            await hub.aclose()
            await health.aclose()
            await plans.aclose()

    def page(request: Request) -> Response:
        return FileResponse(STATIC / "index.html", headers={"cache-control": "no-cache"})

    async def sessions(request: Request) -> Response:
        query = request.query_params.get("q", "")[:200]
        limit = _int_param(request, "limit", 200, 1, MAX_SESSIONS)
        assert limit is not None
        rows, total = await plans.sessions(query, limit)
        signals = await health.signals(rows)
        return _json(
            {
                "sessions": [
                    {
                        "name": row.name,
                        "owner": owner_of(row.name),
                        "lastActivity": row.last_activity,
                        "parent": row.parent,
                        "lastSeq": row.last_seq,
                        "workingOn": row.working_on,
                        "signals": found,
                        "progress": None
                        if row.progress is None
                        else {
                            "completed": row.progress.completed,
                            "total": row.progress.total,
                            "inProgress": row.progress.in_progress,
                            "cleared": row.progress.cleared,
                        },
                    }
                    for row, found in zip(rows, signals, strict=True)
                ],
                "total": total,
                "limit": limit,
                "unlistedParents": await unlisted_parents(plans, rows),
            }
        )

    async def sessions_stream(request: Request) -> Response:
        query = request.query_params.get("q", "")[:200]

        async def frames() -> AsyncIterator[ServerSentEvent]:
            yield ServerSentEvent(comment="dsh-todo session list stream", retry=retry_ms)
            async with hub.open(query) as handle:
                while True:
                    await handle.rung.wait()
                    handle.rung.clear()
                    yield ServerSentEvent("{}", event="changed")
                    await asyncio.sleep(LIST_GAP)

        return EventSourceResponse(frames(), ping=ping, send_timeout=send_timeout)

    async def events(request: Request) -> Response:
        name = request.path_params["name"]
        before = _int_param(request, "before", None, 0, MAX_SEQ)
        limit = _int_param(request, "limit", 100, 1, MAX_PAGE)
        assert limit is not None
        raw_types = request.query_params.get("types")
        types = None if raw_types is None else frozenset(raw_types.split(","))
        page = await plans.tail(name, before=before, limit=limit, types=types)
        body = {
            "session": name,
            "owner": owner_of(name),
            "events": page.events,
            "more": page.more,
            "cursor": page.cursor,
        }
        return _json(body)

    async def family_of(request: Request) -> Response:
        return _json(await family(plans, request.path_params["name"], MAX_SESSIONS))

    async def projection(request: Request) -> Response:
        return _json(projection_frame(await plans.snapshot(request.path_params["name"])))

    async def stream(request: Request) -> Response:
        name = request.path_params["name"]
        try:
            form = wire_format(request.query_params.getlist("format"))
        except ValueError as error:
            raise _BadRequest(str(error)) from None
        resume = request.headers.get("last-event-id") or _once(request, "after")
        after: int | None = None
        if resume:
            after = _number(resume, "`Last-Event-ID`", -1, MAX_SEQ, "a seq")
        now = await plans.snapshot(name)  # an unknown session is a 404, before streaming
        if form is not None:
            return _wire_response(
                plans, WireStream(form, name), now, retry_ms, ping=ping, send_timeout=send_timeout
            )
        # Past the end (a replaced log), or too far behind for every step to be worth
        # sending: the current plan. One rule for every store, so it is decided here.
        fresh = after is None or not 0 <= now.last_seq - after <= MAX_REPLAY
        first = now if fresh else None

        async def frames() -> AsyncIterator[ServerSentEvent]:
            yield ServerSentEvent(comment="dsh-todo projection stream", retry=retry_ms)
            snapshot, position = first, after
            try:
                while True:
                    if snapshot is not None:
                        yield _sse(projection_frame(snapshot))
                        position = snapshot.last_seq
                    assert position is not None
                    try:
                        # closed at once when the client goes: the follower holds its log open
                        following = plans.follow(name, after=position, since=snapshot)
                        async with _closing(following) as events:
                            async for event in events:
                                if event["type"] in PLAN_EVENTS:
                                    where = f"session {name!r}, seq {event['seq']}"
                                    yield _sse(projection_frame(checked_deciding(event, where)))
                    except LogReplaced:
                        snapshot = await plans.snapshot(name)
            except (InvalidLog, SessionNotFound, OSError) as error:
                # A SessionNotFound carries only the name: say what happened to it.
                message = (
                    f"session {_shown_name(name)}: its log was deleted"
                    if isinstance(error, SessionNotFound)
                    else str(error)
                )
                yield ServerSentEvent(json.dumps({"error": message}), event="fatal")

        return EventSourceResponse(frames(), ping=ping, send_timeout=send_timeout)

    async def not_found(request: Request, error: Exception) -> Response:
        return _error(404, f"no session {_shown_name(error.args[0])} is served")

    async def bad_request(request: Request, error: Exception) -> Response:
        return _error(400, str(error))

    async def invalid_log(request: Request, error: Exception) -> Response:
        return _error(422, str(error))

    async def unavailable(request: Request, error: Exception) -> Response:
        if isinstance(error, StoreNotReady):  # it answers: the message says what to run
            return _error(503, str(error))
        return _error(503, f"the store cannot be reached: {error}")

    routes = [
        Route("/", page, methods=["GET"]),
        Route("/s/{name}", page, methods=["GET"]),
        Route("/api/sessions", sessions, methods=["GET"]),
        Route("/api/sessions/stream", sessions_stream, methods=["GET"]),
        Route("/api/sessions/{name}/events", events, methods=["GET"]),
        Route("/api/sessions/{name}/family", family_of, methods=["GET"]),
        Route("/api/sessions/{name}/projection", projection, methods=["GET"]),
        Route("/api/sessions/{name}/stream", stream, methods=["GET"]),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]
    handlers: dict[Any, Callable[[Request, Exception], Awaitable[Response]]] = {
        SessionNotFound: not_found,
        _BadRequest: bad_request,
        InvalidLog: invalid_log,
        StoreUnavailable: unavailable,
    }
    app = Starlette(routes=routes, lifespan=lifespan, exception_handlers=handlers)
    app.add_middleware(
        Guard,
        hosts=served_hosts(host, port, extra_hosts),
        token=token,
        cookie=token_cookie(port),
    )
    return app


__all__ = [
    "cookie_values",
    "create_app",
    "is_loopback",
    "new_token",
    "projection_frame",
    "served_hosts",
    "token_cookie",
]
