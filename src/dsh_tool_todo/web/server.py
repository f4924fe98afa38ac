"""``dsh-todo serve``: run the web view under uvicorn, safe by default.

It binds to loopback unless told otherwise. Binding to an address other
machines can reach needs ``expose=True``, prints a warning, and requires a
token printed at start, because session logs hold whatever the model wrote.
Open streams never hold up Ctrl-C: uvicorn gives connections a fraction of a
second to close, and the streams end when the server begins to stop. A source
that cannot be read is refused before the banner; one that goes away while
served is said once per failure episode on ``err`` (:class:`_Episodes`), not
at each reconnection attempt of a database's pool.
"""

from __future__ import annotations

import errno
import logging
import socket
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TextIO

from ..errors import MissingExtra, UsageError, missing_extra

__all__ = ["serve"]

SHUTDOWN_GRACE = 0.5  # seconds open connections get on Ctrl-C
OPEN_FILES = 65536  # the soft limit on open files serve raises itself to, at most
QUIET_AFTER = 300.0  # seconds without a failure that end an episode (a pool: a connection made)
POOL_LOGGER = "psycopg.pool"  # its every reconnection attempt is a warning
STORE_LOGGERS = (POOL_LOGGER, "dsh_tool_todo")


def serve(
    source: str,
    *,
    host: str,
    port: int,
    expose: bool,
    allow_hosts: Sequence[str],
    out: TextIO,
    err: TextIO,
    note: str | None = None,
    requests: bool = False,
) -> None:
    """Serve ``source`` (a directory or database URL, :func:`~dsh_tool_todo.stores.open_reader`)
    at ``host:port`` until interrupted; ``note`` is said on ``err`` once it serves. With
    ``requests``, the page may file a person's requests against a plan (docs/requests.md)."""
    try:
        import uvicorn

        from ..stores import open_reader
        from ._guard import check_allowed_hosts, is_loopback, new_token
        from .app import create_app
    except MissingExtra:
        raise
    except ImportError as error:
        raise missing_extra("dsh-todo serve", "web", error) from None
    if not 0 < port < 65536:
        raise UsageError(f"--port must be from 1 to 65535 (got {port})")
    check_allowed_hosts(allow_hosts, "--allow-host")
    token = None
    if expose and is_loopback(host):
        print(
            f"dsh-todo: warning: --expose has no effect with --host {host}, which only this "
            "machine reaches: to serve others, pass the address they reach too (e.g. --host "
            "0.0.0.0 --allow-host NAME)",
            file=err,
            flush=True,
        )
    if not is_loopback(host):
        if not expose:
            raise UsageError(
                f"--host {host} is reachable from other machines; pass --expose to allow it "
                "(a token will then be required)"
            )
        if host.strip("[]") in ("0.0.0.0", "::") and not allow_hosts:
            raise UsageError(
                f"--host {host} answers on every address: name the ones clients use with "
                "--allow-host (checked against the Host header of each request)"
            )
        token = new_token()
        print(
            f"dsh-todo: warning: serving on {host}, beyond this machine: anyone who can reach "
            "it and holds the token below can read every served session log",
            file=err,
            flush=True,
        )
    reader = open_reader(source, check=True)  # a source it cannot read: refused before a banner
    app = create_app(
        reader,
        host=host,
        port=port,
        extra_hosts=allow_hosts,
        token=token,
        warm_list=True,
        requests=source if requests else False,
        inboxes=source,  # what was asked is read on every server: the inboxes are there
    )
    _raise_open_files()  # each open stream holds a socket and its log: 1024 is soon reached
    listener = _listen(host, port)  # a taken port is one line and status 2, before any banner
    config = _config(app, host, port)
    shown = f"[{host}]" if ":" in host else host
    address = f"http://{shown}:{port}/"
    mode = "read-only" if not requests else "read-only; requests to agents on"
    print(f"Serving {reader.where} ({mode}) at {address}", file=out, flush=True)
    if token is not None:
        print(f"Token: {token}\nOpen {address}?token={token}", file=out, flush=True)
    print("Press Ctrl-C to stop.", file=out, flush=True)
    if note is not None:
        print(note, file=err, flush=True)
    with listener, _said_once_per_episode(err, reader.where):
        uvicorn.Server(config).run(sockets=[listener])


def _config(app: Any, host: str, port: int) -> Any:
    """uvicorn's configuration, loaded: its protocol's imports are done before the banner."""
    import uvicorn

    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        lifespan="on",
        ws="none",  # it serves no websocket: importing a stack for one delayed the first list
        timeout_graceful_shutdown=SHUTDOWN_GRACE,  # type: ignore[arg-type]  # a float works
        server_header=False,
    )
    config.load()
    return config


class _Episodes(logging.Handler):
    """The stores' warnings while serving, one line per failure episode: a database that went
    away is said once, not at each of its pool's reconnection attempts (nor at each retry of
    the list's changes); said again once it answered (a connection made) or after
    :data:`QUIET_AFTER` seconds without a failure. What clients meet meanwhile, each request
    answers (503, or a stream's frame)."""

    def __init__(self, err: TextIO, where: str, clock: Callable[[], float] = time.monotonic):
        super().__init__(logging.DEBUG)
        self.err = err
        self.where = where
        self.clock = clock
        self.failing: dict[str, float] = {}  # logger -> when it last said a failure

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self._emit(record)
        except Exception:
            self.handleError(record)

    def _emit(self, record: logging.LogRecord) -> None:
        if record.levelno < logging.WARNING:
            if record.name == POOL_LOGGER and str(record.msg).startswith("adding new connection"):
                self.failing.pop(POOL_LOGGER, None)  # it answers again
            return
        now = self.clock()
        last = self.failing.get(record.name)
        self.failing[record.name] = now
        if last is not None and now - last < QUIET_AFTER:
            return
        from ..plans.checklist import escape_content

        said = record.getMessage().strip().split("\n")[0]  # its first line: no traceback
        if record.name == POOL_LOGGER:
            said = f"{self.where}: {said}"
        shown = escape_content(said, encoding=getattr(self.err, "encoding", None))
        print(
            f"dsh-todo serve: warning: {shown} (said once until it answers again)",
            file=self.err,
            flush=True,
        )


@contextmanager
def _said_once_per_episode(err: TextIO, where: str) -> Iterator[_Episodes]:
    """While serving, the stores' loggers speak through :class:`_Episodes` alone (the pool's
    at INFO too: a connection made ends its episode); as they were afterwards."""
    handler = _Episodes(err, where)
    loggers = [logging.getLogger(name) for name in STORE_LOGGERS]
    saved = [(logger.level, logger.propagate) for logger in loggers]
    for logger in loggers:
        logger.addHandler(handler)
        logger.propagate = False
    pool = loggers[0]
    if not pool.isEnabledFor(logging.INFO):
        pool.setLevel(logging.INFO)
    try:
        yield handler
    finally:
        for logger, (level, propagate) in zip(loggers, saved, strict=True):
            logger.removeHandler(handler)
            logger.setLevel(level)
            logger.propagate = propagate


def _raise_open_files(limit: int = OPEN_FILES) -> int | None:
    """Raise the soft limit on open files toward the hard one, to at most ``limit``; the soft
    limit now (``None`` where there is none to set). A limit that cannot be raised is kept."""
    try:
        import resource
    except ImportError:  # Windows: no such limit
        return None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = limit if hard == resource.RLIM_INFINITY else min(hard, limit)
    if soft == resource.RLIM_INFINITY or soft >= want:
        return soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    except (OSError, ValueError):  # macOS refuses more than its OPEN_MAX
        return soft
    return want


def _listen(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port``; ``OSError`` naming the address if it cannot be had."""
    name = host.strip("[]")
    family = socket.AF_INET6 if ":" in name else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((name, port))
        listener.listen(2048)
    except OSError as error:
        listener.close()
        hint = ": pass another --port" if error.errno in (errno.EADDRINUSE, errno.EACCES) else ""
        raise OSError(f"cannot listen on {host}:{port}: {error.strerror or error}{hint}") from None
    listener.set_inheritable(True)
    return listener
