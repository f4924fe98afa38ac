"""Helpers for the web view's tests: logs on disk, in-process requests, a real server, SSE."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from dsh_tool_todo.core.contract import EVENT_TYPE
from dsh_tool_todo.web.app import create_app
from tests._builders import todo as todo
from tests._builders import todos
from tests._builders import write_log as write_log
from tests._processes import stop_process

# The checks both stores' tests share live in a helper module: report their asserts as a
# test module's are.
pytest.register_assert_rewrite("tests.web._readers")

HOST = "127.0.0.1"
ASGI_PORT = 8765
Todos = list[dict[str, str]]


def plan_write(*items: dict[str, str]) -> tuple[str, dict[str, Any]]:
    """A ``todo/write`` of ``items`` as (type, data), for ``write_log`` and ``append``."""
    return (EVENT_TYPE, todos(*items))


TURN = ("turn/start", {})
NOTE = ("message/assistant", {"text": "thinking"})


def run_requests(
    app: Any, calls: Callable[[httpx.AsyncClient], Awaitable[Any]], *, host: str | None = None
) -> Any:
    """Run ``calls`` against ``app`` in process, with its lifespan, and return their result."""

    async def main() -> Any:
        base = f"http://{host or f'{HOST}:{ASGI_PORT}'}"
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url=base) as client:
                return await calls(client)

    return asyncio.run(main())


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        port: int = probe.getsockname()[1]
        return port


@dataclass
class LiveServer:
    """A real uvicorn server on a free port, in a thread, for endless streams."""

    app: Any
    port: int
    server: uvicorn.Server
    thread: threading.Thread

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"


@pytest.fixture
def live_server() -> Iterator[Callable[..., LiveServer]]:
    started: list[LiveServer] = []

    def start(source: Path, **options: Any) -> LiveServer:
        port = free_port()
        app = create_app(source, host=HOST, port=port, **options)
        config = uvicorn.Config(
            app, host=HOST, port=port, log_level="warning", timeout_graceful_shutdown=1
        )
        server = uvicorn.Server(config)
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        deadline = time.monotonic() + 10
        while not server.started:
            if time.monotonic() > deadline or not thread.is_alive():
                raise RuntimeError("the test server did not start")
            time.sleep(0.01)
        live = LiveServer(app, port, server, thread)
        started.append(live)
        return live

    yield start
    for live in started:
        live.server.should_exit = True
        live.thread.join(timeout=10)


@pytest.fixture(params=["jsonl", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """A lead and its sub-agents' sessions for the tree streams' tests (``_fleet.Store``): JSONL
    logs in ``tmp_path``, or a fresh PostgreSQL database."""
    from ._fleet import opened_store  # PostgreSQL's test helpers: only for the tests that ask

    with opened_store(request.param, tmp_path) as opened:
        yield opened


@dataclass
class Frame:
    """One server-sent event as the wire carried it."""

    event: str | None = None
    id: str | None = None  # the seq part of the frame's id (``<seq>.<plan mark>``)
    full_id: str | None = None  # the id as sent: what a client resumes with
    data: str = ""
    retry: int | None = None
    comments: list[str] = field(default_factory=list)

    def json(self) -> Any:
        return json.loads(self.data)


class SseStream:
    """A streaming GET read event by event, each wait bounded by a deadline."""

    def __init__(self, url: str, headers: dict[str, str] | None = None) -> None:
        self.client = httpx.Client(timeout=httpx.Timeout(5.0, read=5.0))
        self.context = self.client.stream("GET", url, headers=headers or {})
        self.response = self.context.__enter__()
        self.lines = self.response.iter_lines()

    def next(self, *, within: float = 10.0) -> Frame:
        """The next event (comment-only keep-alives included), or fail after ``within`` seconds."""
        frame = Frame()
        seen = False
        result: list[Frame] = []
        error: list[BaseException] = []

        def read() -> None:
            nonlocal seen
            try:
                for line in self.lines:
                    if line == "":
                        if seen:
                            result.append(frame)
                            return
                        continue
                    seen = True
                    key, _, value = line.partition(":")
                    value = value.removeprefix(" ")
                    if key == "":
                        frame.comments.append(value)
                    elif key == "data":
                        frame.data = f"{frame.data}\n{value}" if frame.data else value
                    elif key == "id":
                        frame.full_id = value
                        frame.id = value.partition(".")[0]
                    elif key == "event":
                        frame.event = value
                    elif key == "retry":
                        frame.retry = int(value)
            except BaseException as caught:  # reported to the test below
                error.append(caught)

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(within)
        if error:
            raise error[0]
        if not result:
            raise TimeoutError(f"no event within {within} s")
        return result[0]

    def projection(self, *, within: float = 10.0) -> Frame:
        """The next ``projection`` frame, skipping keep-alives."""
        deadline = time.monotonic() + within
        while True:
            frame = self.next(within=max(0.05, deadline - time.monotonic()))
            if frame.event == "projection":
                return frame

    def named_event(self, *, within: float = 10.0) -> Frame:
        """The next frame that names an event, skipping keep-alives (each waited ``within``)."""
        frame = self.next(within=within)
        while frame.event is None:
            frame = self.next(within=within)
        return frame

    def close(self) -> None:
        self.context.__exit__(None, None, None)
        self.client.close()


@pytest.fixture
def sse() -> Iterator[Callable[..., SseStream]]:
    opened: list[SseStream] = []

    def open_stream(url: str, headers: dict[str, str] | None = None) -> SseStream:
        stream = SseStream(url, headers)
        opened.append(stream)
        return stream

    yield open_stream
    for stream in opened:
        stream.close()


@dataclass
class ServeProcess:
    """``dsh-todo serve`` in a child process."""

    process: subprocess.Popen[str]
    port: int
    first_lines: list[str]

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def interrupt(self) -> float:
        """Send SIGINT; the seconds until the process exits."""
        began = time.monotonic()
        self.process.send_signal(signal.SIGINT)
        self.process.wait(timeout=10)
        return time.monotonic() - began


def start_serve(
    source: Path | str, *args: str, port: int | None = None, wait_for: str = "Ctrl-C"
) -> ServeProcess:
    """Start ``dsh-todo serve SOURCE`` and wait until it answers HTTP."""
    port = port or free_port()
    command = [sys.executable, "-m", "dsh_tool_todo", "serve", str(source), "--port", str(port)]
    environment = {**os.environ, "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(
        [*command, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment,
    )
    assert process.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + 20
    while True:
        line = process.stdout.readline()
        if not line:
            error = process.stderr.read() if process.stderr else ""
            raise RuntimeError(f"dsh-todo serve exited early: {error}")
        lines.append(line.rstrip("\n"))
        if wait_for in line:
            break
        if time.monotonic() > deadline:
            process.kill()
            raise RuntimeError("dsh-todo serve did not start")
    host_name = "127.0.0.1" if "--host" not in args else args[args.index("--host") + 1]
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host_name, port), timeout=0.2):
                break
        except OSError:
            time.sleep(0.02)
    return ServeProcess(process, port, lines)


@pytest.fixture
def serve_process() -> Iterator[Callable[..., ServeProcess]]:
    started: list[ServeProcess] = []

    def start(source: Path | str, *args: str, **options: Any) -> ServeProcess:
        child = start_serve(source, *args, **options)
        started.append(child)
        return child

    yield start
    for child in started:
        stop_process(child.process)
