"""``dsh-todo demo --serve``: the web view of the demo's directory, with the scripted session
played into it at a human pace beside the server, which keeps serving until Ctrl-C.

The port is taken, and the directory read, before the demo's log is made: a port in use or a
missing extra leaves nothing behind. The player is a thread beside uvicorn, which keeps the
main thread for its Ctrl-C handling; it stops between two steps when the server stops.
"""

from __future__ import annotations

import argparse
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import quote

from ..errors import MissingExtra, UsageError, missing_extra
from ._demo import demo_home, fresh_log, make_home, paced, removed_if_empty, run_demo
from ._output import shown_path

__all__: list[str] = []

DEFAULT_PORT = 8765
DEFAULT_PACE = 1.5  # seconds between steps: time to read a call and see the plan move
Play = Callable[[Path, Callable[[], bool]], bool]


def serve_demo(args: argparse.Namespace, out: TextIO, draw: Callable[[Any], str]) -> None:
    """Serve the directory of the demo's log on loopback and play the demo into it."""
    try:
        import uvicorn  # noqa: F401  # the extra is checked here, before anything is made

        from ..web._guard import is_loopback
        from ..web.app import create_app
        from ..web.server import _listen
    except MissingExtra:
        raise
    except ImportError as error:
        raise missing_extra("dsh-todo demo --serve", "web", error) from None
    host = args.host or "127.0.0.1"
    port = DEFAULT_PORT if args.port is None else args.port
    if not is_loopback(host):
        raise UsageError(
            f"--host {host} is reachable from other machines: the demo serves this machine "
            "only (127.0.0.1, ::1 or localhost); `dsh-todo serve --expose` shares a view"
        )
    if not 0 < port < 65536:
        raise UsageError(f"--port must be from 1 to 65535 (got {port})")
    directory = demo_home() if args.log is None else args.log.parent
    listener = _taken(_listen, host, port)
    with listener:
        if args.log is None:
            make_home(directory)  # a first demo makes the default place
        app = create_app(str(directory), host=host, port=port)
        log = fresh_log(directory) if args.log is None else args.log
        with removed_if_empty(log):
            _serve_log(args, out, draw, log, app, (host, port), listener)


def _serve_log(
    args: argparse.Namespace,
    out: TextIO,
    draw: Callable[[Any], str],
    log: Path,
    app: Any,
    address: tuple[str, int],
    listener: socket.socket,
) -> None:
    """Serve ``app`` at ``address`` and play the demo into ``log`` beside it."""
    import uvicorn

    from ..web.server import SHUTDOWN_GRACE

    host, port = address
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        lifespan="on",
        ws="none",
        timeout_graceful_shutdown=SHUTDOWN_GRACE,  # type: ignore[arg-type]  # a float works
        server_header=False,
    )
    config.load()
    server = uvicorn.Server(config)
    shown = f"[{host.strip('[]')}]" if ":" in host else host
    base = f"http://{shown}:{port}/"
    page = f"{base}s/{quote(log.stem, safe='')}"
    print(f"Serving {shown_path(log.parent, out)} (read-only) at {base}", file=out)
    print(f"The demo plays into {shown_path(log, out)}: watch it at {page}", file=out)
    print("Press Ctrl-C to stop.", file=out, flush=True)

    def play(log: Path, go_on: Callable[[], bool]) -> bool:
        return run_demo(log, out, parallel=args.parallel, draw=draw, go_on=go_on)

    pace = DEFAULT_PACE if args.pace is None else args.pace
    _serve_beside(server, listener, _player(log, page, play, pace, args.open, out))


def _taken(listen: Callable[[str, int], socket.socket], host: str, port: int) -> socket.socket:
    try:
        return listen(host, port)
    except OSError as error:
        raise UsageError(str(error)) from None


def _player(
    log: Path, page: str, play: Play, pace: float, open_browser: bool, out: TextIO
) -> Callable[[threading.Event], None]:
    """What the player thread runs: the browser, if asked for, then the demo at ``pace``."""

    def run(stop: threading.Event) -> None:
        if open_browser:
            import webbrowser

            if not webbrowser.open(page):
                print(f"(no browser could be opened: open {page} yourself)", file=out, flush=True)
        if play(log, paced(pace, stop)):
            print("The demo is over; the view keeps serving. Press Ctrl-C to stop.", file=out)
            out.flush()

    return run


def _serve_beside(
    server: Any, listener: socket.socket, player: Callable[[threading.Event], None]
) -> None:
    """Run ``server`` here and ``player`` in a thread until the server stops (Ctrl-C, or the
    player failed: its error is raised here); the player is stopped between two steps."""
    stop = threading.Event()
    failed: list[BaseException] = []

    def run() -> None:
        try:
            player(stop)
        except BaseException as error:  # raised again in the main thread, below
            failed.append(error)
            server.should_exit = True

    thread = threading.Thread(target=run, name="dsh-todo demo", daemon=True)
    thread.start()
    try:
        server.run(sockets=[listener])
    finally:
        stop.set()
        thread.join(timeout=10)
    if failed:
        raise failed[0]
