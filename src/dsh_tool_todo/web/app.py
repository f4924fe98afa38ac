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
  changes as AG-UI events or AI SDK UI message chunks (``_wire_stream``); ``?requests=1``
  adds a ``requests`` frame per event that may change what was asked;
- ``GET /api/sessions/{name}/requests`` — what was asked of the session: the requests
  still waiting and those of its current turn, each with how it stands (``_requests``).

Every request must name the served address in its ``Host`` header (a DNS
rebinding page cannot), and, when a token is set, carry it. Pages load no
inline script, under a strict Content-Security-Policy; model-written text is
only ever set as text by the page script.

This module assembles the app; the endpoints are ``_routes``, the streams
``_streams``, the gate ``_guard``. It knows no store: what it asks of one is a
capability of the reader protocol, and a path or URL is opened by
:func:`dsh_tool_todo.stores.open_reader`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Collection
from pathlib import Path

from ..errors import needs_extra

with needs_extra("the web view", "web"):
    import sse_starlette  # noqa: F401  # the streams' framework: its absence named here
    from starlette.applications import Starlette

from ..protocols import LogReader
from ..stores import open_reader
from ._fleet import SignalCache
from ._guard import Guard, served_hosts, token_cookie
from ._listhub import ListHub
from ._routes import Views
from ._streams import Timing

__all__ = ["create_app"]

FIRST_LIST = 200  # rows of the list the page asks for first (static/app.js), read at start


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
    requests: bool | str | Path = False,
    inboxes: str | Path | None = None,
) -> Starlette:
    """The web view of ``source`` (a :class:`LogReader`, a directory, or a ``postgresql://`` URL).

    ``host`` and ``port`` are the address it is served at: requests naming
    any other in their ``Host`` header are refused. With ``token``, every
    request must carry it (``Authorization: Bearer``, the cookie the page
    gets, or ``?token=`` once). ``ping`` is the keep-alive period of streams
    in seconds, ``retry_ms`` the reconnect delay they advise. With ``warm_list`` (what
    ``dsh-todo serve`` does), the reader holds its list's index between lists
    (:meth:`~dsh_tool_todo.protocols.LogReader.hold_list`), and the page's first list is
    read once at start.

    With ``requests`` (``dsh-todo serve --requests``), the page may file a person's requests
    against a session's plan (docs/requests.md): the one route that changes anything, under
    guards of its own (``_requests``). ``True`` for a ``source`` given as a directory or URL;
    with a reader, the directory or URL it reads. Every server lists what was asked, read-only
    without ``requests``: with a reader, ``inboxes`` is the directory or URL it reads (what
    ``dsh-todo serve`` passes; a directory's reader finds each inbox beside its log).
    """
    from ._requests import request_routes

    plans = open_reader(source) if isinstance(source, (str, Path)) else source
    hosts = served_hosts(host, port, extra_hosts)
    asking = request_routes(plans, hosts, source=source, requests=requests, inboxes=inboxes)
    hub = ListHub(plans)
    health = SignalCache(plans, on_late=hub.ring)

    async def warm() -> None:
        """Hold the list's index and read the page's first list once, at start: the first
        page then finds its rows' summaries and signals known."""
        if not warm_list:
            return
        plans.hold_list()
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

    views = Views(plans, hub, health, Timing(ping, retry_ms, send_timeout))
    routes = views.routes()
    routes[-1:-1] = asking
    app = Starlette(routes=routes, lifespan=lifespan, exception_handlers=views.errors())
    app.add_middleware(
        Guard,
        hosts=hosts,
        token=token,
        cookie=token_cookie(port),
    )
    return app
