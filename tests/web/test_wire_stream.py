"""The session stream in its AG-UI and AI SDK forms, read by each ecosystem's own client.

``?format=ag-ui`` is read by ``@ag-ui/client``'s ``HttpAgent`` (asking with GET),
``?format=ai-sdk`` by the ``ai`` package's ``parseJsonEventStream`` and
``readUIMessageStream``, both under node from tests/node (``npm ci --prefix
tests/node``): a missing one fails these tests, never skips them. The rest
checks the wire bytes, resume, the guards and the hostile cases over httpx.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from dsh_tool_todo.core.contract import EVENT_TYPE
from dsh_tool_todo.errors import InvalidLog
from dsh_tool_todo.protocols import Event, Snapshot
from dsh_tool_todo.stores import open_session
from dsh_tool_todo.stores._inbox import take_requests
from dsh_tool_todo.stores.jsonl import JsonlReader, JsonlSession
from dsh_tool_todo.stores.requests import PlanRequests
from dsh_tool_todo.web._wire_stream import WireFormat, WireStream
from dsh_tool_todo.web.app import create_app
from tests._processes import stop_process

from .conftest import (
    NOTE,
    TURN,
    Frame,
    LiveServer,
    SseStream,
    plan_write,
    run_requests,
    todo,
)
from .conftest import write_log as write_events

Server = Callable[..., LiveServer]
Opener = Callable[..., SseStream]

NODE_DIR = Path(__file__).parent.parent / "node"
# SSE and HTML both ride in the content: a frame break, a fake event, markup, a lone surrogate.
HOSTILE = '<img src=x onerror=alert(1)>\r\n\r\ndata: {"type":"RUN_ERROR"}\n\n \u2028 \ud800 計画'


def url_of(server: LiveServer, form: str, name: str = "s") -> str:
    return f"{server.url}/api/sessions/{name}/stream?format={form}"


def node_script(name: str, package: str) -> list[str]:
    node = shutil.which("node")
    assert node is not None, "node is not installed: install Node.js >= 18 (apt-get install nodejs)"
    assert (NODE_DIR / "node_modules" / package).is_dir(), (
        f"{package} is not installed for the node tests: run `npm ci --prefix {NODE_DIR}`"
    )
    return [node, str(NODE_DIR / name)]


class NodeClient:
    """A node script printing one JSON line per thing it saw, read line by line with deadlines."""

    def __init__(self, command: list[str]) -> None:
        self.process = subprocess.Popen(
            command,
            cwd=NODE_DIR,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def next(self, within: float = 20.0) -> dict[str, Any]:
        try:
            line = self.lines.get(timeout=within)
        except queue.Empty:
            raise TimeoutError(f"the node client printed nothing within {within} s") from None
        if line is None:
            assert self.process.stderr is not None
            raise AssertionError(f"the node client ended early: {self.process.stderr.read()}")
        value: dict[str, Any] = json.loads(line)
        return value

    def close(self) -> None:
        stop_process(self.process)


@pytest.fixture
def node() -> Iterator[Callable[..., NodeClient]]:
    started: list[NodeClient] = []

    def start(script: str, package: str, *args: str) -> NodeClient:
        client = NodeClient([*node_script(script, package), *args])
        started.append(client)
        return client

    yield start
    for client in started:
        client.close()


def ag_ui(node: Callable[..., NodeClient], url: str, count: int, *args: str) -> NodeClient:
    return node("read_ag_ui_stream.mjs", "@ag-ui/client", url, str(count), *args)


def ai_sdk(node: Callable[..., NodeClient], url: str, count: int, *args: str) -> NodeClient:
    return node("read_ui_message_stream.mjs", "ai", url, str(count), *args)


def append(path: Path, *events: tuple[str, dict[str, Any]]) -> None:
    with JsonlSession(path) as session:
        for kind, data in events:
            session.append(kind, data)


def data_frame(stream: SseStream) -> Frame:
    """The next frame carrying data, past the opening comment and keep-alives."""
    frame = stream.next()
    while not frame.data:
        frame = stream.next()
    return frame


# --- AG-UI, read by @ag-ui/client -----------------------------------------------------------


def test_ag_ui_http_agent_reads_the_plan_as_one_activity_and_the_state(
    tmp_path: Path, live_server: Server, node: Callable[..., NodeClient]
) -> None:
    path = tmp_path / "s.jsonl"
    write_events(path, [TURN, plan_write(todo("A", "in_progress"), todo("B"))])
    # Keep-alive comments every 0.1 s fall between the events: the client passes over them.
    client = ag_ui(node, url_of(live_server(tmp_path, ping=0.1), "ag-ui"), 4)

    started = client.next()["runStarted"]
    first = client.next()
    append(path, NOTE, plan_write(todo("A", "completed"), todo(HOSTILE, "in_progress")))
    second = client.next()
    append(path, TURN)
    third = client.next()
    append(path, plan_write(todo("C")))
    fourth = client.next()
    aborted = client.next()
    done = client.next()

    assert started["threadId"] == "s"
    assert started["runId"]
    plan = [todo("A", "in_progress"), todo("B")]
    activity = {"id": "plan:s", "role": "activity", "activityType": "PLAN"}
    assert first == {
        "state": {"todos": plan},
        "messages": [{**activity, "content": first["state"]}],
    }
    # A second ACTIVITY_SNAPSHOT with the same messageId replaces the activity; the
    # STATE_DELTA sets the state's todos. Content arrives exactly as written.
    plan = [todo("A", "completed"), todo(HOSTILE, "in_progress")]
    assert second == {
        "state": {"todos": plan},
        "messages": [{**activity, "content": second["state"]}],
    }
    assert third == {"state": {"todos": []}, "messages": [{**activity, "content": {"todos": []}}]}
    assert fourth["messages"] == [{**activity, "content": {"todos": [todo("C")]}}]
    assert done["done"][:3] == ["RUN_STARTED", "ACTIVITY_SNAPSHOT", "STATE_SNAPSHOT"]
    assert done["done"][3:9] == ["ACTIVITY_SNAPSHOT", "STATE_DELTA"] * 3
    # The client's own abort after the fourth change, which the client reports as RUN_ERROR.
    assert aborted["runError"]["code"] == "abort"
    assert done["done"][9:] == ["RUN_ERROR"]


def test_ag_ui_an_unmodified_http_agent_posting_is_refused_with_405(
    tmp_path: Path, live_server: Server, node: Callable[..., NodeClient]
) -> None:
    write_events(tmp_path / "s.jsonl", [plan_write(todo("A"))])
    client = ag_ui(node, url_of(live_server(tmp_path), "ag-ui"), 1, "post")

    failed = client.next()

    assert failed["status"] == 405
    assert failed["seen"] == []
    assert (tmp_path / "s.jsonl").read_bytes().count(b"\n") == 1  # nothing was written


def test_ag_ui_with_a_token_the_agent_sends_it_and_without_it_is_refused(
    tmp_path: Path, live_server: Server, node: Callable[..., NodeClient]
) -> None:
    write_events(tmp_path / "s.jsonl", [plan_write(todo("A"))])
    url = url_of(live_server(tmp_path, token="t0k3n"), "ag-ui")

    refused = ag_ui(node, url, 1).next()
    admitted = ag_ui(node, url, 1, "get", json.dumps({"Authorization": "Bearer t0k3n"}))

    assert refused["status"] == 401
    assert admitted.next()["runStarted"]["threadId"] == "s"
    assert admitted.next()["state"] == {"todos": [todo("A")]}


def test_ag_ui_a_log_deleted_under_the_stream_ends_the_run_with_run_error(
    tmp_path: Path, live_server: Server, node: Callable[..., NodeClient]
) -> None:
    path = tmp_path / "s.jsonl"
    write_events(path, [plan_write(todo("A"))])
    client = ag_ui(node, url_of(live_server(tmp_path), "ag-ui"), 5)
    client.next()
    client.next()

    path.unlink()

    assert client.next()["runError"] == {
        "message": "session 's': its log was deleted",
        "code": "session_deleted",
    }
    assert client.next()["done"][-1] == "RUN_ERROR"


# --- the AI SDK, read by `ai` ---------------------------------------------------------------


def test_ai_sdk_reader_keeps_one_data_plan_part_replaced_by_each_write(
    tmp_path: Path, live_server: Server, node: Callable[..., NodeClient]
) -> None:
    path = tmp_path / "s.jsonl"
    write_events(path, [plan_write(todo("A", "in_progress"))])
    client = ai_sdk(node, url_of(live_server(tmp_path, ping=0.1), "ai-sdk"), 3)

    first = client.next()
    append(path, plan_write(todo("A", "completed"), todo(HOSTILE)))
    second = client.next()
    append(path, NOTE, TURN)
    third = client.next()

    def part(*todos: dict[str, str]) -> dict[str, Any]:
        return {"type": "data-plan", "id": "plan:s", "data": {"todos": list(todos)}}

    assert first == {"id": "plan:s", "parts": [part(todo("A", "in_progress"))]}
    assert second == {"id": "plan:s", "parts": [part(todo("A", "completed"), todo(HOSTILE))]}
    assert third == {"id": "plan:s", "parts": [part()]}
    assert client.next() == {"done": 3}


def test_ai_sdk_a_broken_line_ends_the_stream_with_an_error_chunk(
    tmp_path: Path, live_server: Server, node: Callable[..., NodeClient]
) -> None:
    path = tmp_path / "s.jsonl"
    write_events(path, [plan_write(todo("A"))])
    client = ai_sdk(node, url_of(live_server(tmp_path), "ai-sdk"), 5)
    client.next()

    with path.open("ab") as log:
        log.write(b"<html>not an event</html>\n")

    error = client.next()["error"]
    assert "not a session event" in error
    assert "s.jsonl" in error
    assert client.next() == {"done": 1}  # the stream ended there


# --- the wire, the guards and the hostile cases ----------------------------------------------


def test_the_wire_bytes_of_each_form_separate_frames_with_bare_newlines(
    tmp_path: Path, live_server: Server
) -> None:
    # AG-UI's client splits the body on "\n\n" only: a "\r\n" stream would reach it as nothing.
    write_events(tmp_path / "s.jsonl", [TURN])
    server = live_server(tmp_path)

    def opening(form: str, frames: int) -> tuple[httpx.Headers, bytes]:
        received = b""
        with httpx.stream("GET", url_of(server, form), timeout=10) as response:
            for chunk in response.iter_raw():
                received += chunk
                if received.count(b"\n\n") >= frames:
                    return response.headers, received
        raise AssertionError(f"the stream ended after {received!r}")

    ag_headers, ag_bytes = opening("ag-ui", 4)
    ai_headers, ai_bytes = opening("ai-sdk", 3)

    hello, start, activity, state = ag_bytes.decode().split("\n\n")[:4]
    assert b"\r" not in ag_bytes
    assert b"\r" not in ai_bytes
    assert hello == ": dsh-todo ag-ui stream\nretry: 1000"
    assert start.startswith('data: {"type":"RUN_STARTED","threadId":"s","runId":"s:')
    assert activity == (
        'id: 0\ndata: {"type":"ACTIVITY_SNAPSHOT","messageId":"plan:s","activityType":"PLAN",'
        '"content":{"todos":[]},"replace":true}'
    )
    assert state == 'id: 0\ndata: {"type":"STATE_SNAPSHOT","snapshot":{"todos":[]}}'
    assert ai_bytes == (
        b": dsh-todo ai-sdk stream\nretry: 1000\n\n"
        b'data: {"type":"start","messageId":"plan:s"}\n\n'
        b'id: 0\ndata: {"type":"data-plan","id":"plan:s","data":{"todos":[]}}\n\n'
    )
    for headers in (ag_headers, ai_headers):
        assert headers["content-type"].startswith("text/event-stream")
        assert headers["cache-control"] == "no-store"
        assert "script-src 'self'" in headers["content-security-policy"]
    assert ai_headers["x-vercel-ai-ui-message-stream"] == "v1"


def test_content_cannot_break_out_of_its_frame(
    tmp_path: Path, live_server: Server, sse: Opener
) -> None:
    write_events(tmp_path / "s.jsonl", [plan_write(todo(HOSTILE))])
    stream = sse(url_of(live_server(tmp_path), "ai-sdk"))

    data_frame(stream)
    frame = data_frame(stream)

    assert frame.id == "0"
    assert frame.json()["data"]["todos"] == [todo(HOSTILE)]
    assert frame.data.isascii()
    assert "\n" not in frame.data


@pytest.mark.parametrize("form", ["ag-ui", "ai-sdk"])
def test_a_resumed_stream_starts_again_from_a_snapshot(
    tmp_path: Path, live_server: Server, sse: Opener, form: str
) -> None:
    path = tmp_path / "s.jsonl"
    write_events(path, [plan_write(todo(f"v{n}")) for n in range(4)] + [NOTE])
    server = live_server(tmp_path)

    resumed = sse(url_of(server, form), {"Last-Event-ID": "1"})
    by_query = sse(url_of(server, form) + "&after=1")

    for stream in (resumed, by_query):
        start = data_frame(stream)
        plan = data_frame(stream)
        assert start.id is None
        assert start.json()["type"] in ("RUN_STARTED", "start")
        # The current plan at the log's newest seq: v2 and v3 are not replayed one by one.
        assert plan.id == "4"
        payload = plan.json()
        todos = payload["content" if form == "ag-ui" else "data"]["todos"]
        assert todos == [todo("v3")]
        if form == "ag-ui":
            assert data_frame(stream).json() == {
                "type": "STATE_SNAPSHOT",
                "snapshot": {"todos": [todo("v3")]},
            }
    append(path, plan_write(todo("v4")))
    assert data_frame(resumed).id == "5"


@pytest.mark.parametrize("form", ["ag-ui", "ai-sdk"])
def test_a_replaced_log_sends_the_new_plan_as_a_snapshot(
    tmp_path: Path, live_server: Server, sse: Opener, form: str
) -> None:
    path = tmp_path / "s.jsonl"
    write_events(path, [plan_write(todo(f"old {n}")) for n in range(5)])
    stream = sse(url_of(live_server(tmp_path), form))
    frames = 3 if form == "ag-ui" else 2
    for _ in range(frames):
        data_frame(stream)

    # Deleted and created again under the stream, in one step a reader cannot fall between.
    replacement = tmp_path / "next.tmp"
    write_events(replacement, [plan_write(todo("new"))])
    os.replace(replacement, path)

    frame = data_frame(stream)
    assert frame.id == "0"
    if form == "ag-ui":
        assert frame.json()["content"] == {"todos": [todo("new")]}
        assert data_frame(stream).json()["type"] == "STATE_SNAPSHOT"  # the whole state again
    else:
        assert frame.json()["data"] == {"todos": [todo("new")]}


BAD_PARAMETERS = [
    ("?format=xml", {}, "`format` must be one of ag-ui, ai-sdk, or left out"),
    ("?format=AG-UI", {}, "(got 'AG-UI')"),
    ("?format=ag-ui&format=ai-sdk", {}, "give `format` once (got 2: ['ag-ui', 'ai-sdk'])"),
    ("?format=ag-ui&format=" + "x" * 5000, {}, "got 2: ['ag-ui', '" + "x" * 40 + "']"),
    # docs/web.md: a repeated format, too, is a 400 naming the accepted values
    ("?format=ag-ui&format=ag-ui", {}, "one of ag-ui, ai-sdk"),
    ("?format=ag-ui", {"Last-Event-ID": "DROP TABLE"}, "`Last-Event-ID` must be a seq"),
    ("?format=ai-sdk", {"Last-Event-ID": "-7"}, "`Last-Event-ID` must be a seq"),
    ("?format=ag-ui&after=1e3", {}, "`Last-Event-ID` must be a seq"),
    ("?format=ag-ui", {"Last-Event-ID": "99999999999999999999"}, "`Last-Event-ID` must be a seq"),
]


@pytest.mark.parametrize(("query", "headers", "message"), BAD_PARAMETERS)
def test_bad_parameters_are_refused_with_400_before_the_stream_opens(
    tmp_path: Path, query: str, headers: dict[str, str], message: str
) -> None:
    write_events(tmp_path / "s.jsonl", [plan_write(todo("A"))])
    app = create_app(tmp_path)

    async def calls(client: httpx.AsyncClient) -> httpx.Response:
        return await client.get(f"/api/sessions/s/stream{query}", headers=headers)

    response = run_requests(app, calls)

    assert response.status_code == 400, response.text
    assert message in response.json()["error"]


@pytest.mark.parametrize(
    ("query", "headers"),
    [
        ("?format=ai-sdk", {"Last-Event-ID": "4611686018427387904"}),  # past the end
        ("?format=ag-ui", {"Last-Event-ID": "-1"}),
        ("?format=ag-ui&after=0", {}),
        ("?format=", {}),  # empty: the library's own frames
    ],
)
def test_odd_but_valid_resumes_get_a_snapshot(
    tmp_path: Path, live_server: Server, sse: Opener, query: str, headers: dict[str, str]
) -> None:
    write_events(tmp_path / "s.jsonl", [TURN, plan_write(todo("A"))])
    stream = sse(f"{live_server(tmp_path).url}/api/sessions/s/stream{query}", headers)

    frames = [data_frame(stream) for _ in range(2 if query != "?format=" else 1)]

    assert stream.response.status_code == 200
    assert frames[-1].id == "1"
    assert '[{"content":"A","status":"pending"}]' in frames[-1].data


@pytest.mark.parametrize("form", ["ag-ui", "ai-sdk"])
def test_the_host_check_the_token_and_unknown_sessions_apply_as_today(
    tmp_path: Path, form: str
) -> None:
    write_events(tmp_path / "s.jsonl", [plan_write(todo("A"))])
    app = create_app(tmp_path, token="secret")
    path = f"/api/sessions/s/stream?format={form}"
    bearer = {"Authorization": "Bearer secret"}

    async def calls(client: httpx.AsyncClient) -> list[tuple[int, str]]:
        results = []
        for url, headers in [
            (path, {**bearer, "Host": "evil.example:8765"}),
            (path, {}),
            (f"/api/sessions/nope/stream?format={form}", bearer),
            (f"/api/sessions/..%2Fs/stream?format={form}", bearer),
        ]:
            response = await client.get(url, headers=headers)
            results.append((response.status_code, response.text))
        return results

    rebinding, no_token, unknown, outside = run_requests(app, calls)

    assert rebinding[0] == 403
    assert "does not name this server" in rebinding[1]
    assert no_token[0] == 401
    assert unknown == (404, '{"error":"no session \'nope\' is served"}')
    assert outside[0] == 404


@pytest.mark.parametrize("form", ["ag-ui", "ai-sdk"])
def test_a_write_a_converter_refuses_is_reported_as_a_broken_log(form: WireFormat) -> None:
    # The readers refuse such a write first; this is the stream's own guard behind them.
    blank = {"seq": 3, "type": EVENT_TYPE, "data": {"todos": [todo(" ")]}}
    cleared = {"seq": 4, "type": "turn/start", "data": {}}
    stream = WireStream(form, "s")

    with pytest.raises(InvalidLog, match=r"^session 's', seq 3: .*`content` must be a non-empty"):
        stream.change(blank)
    assert len(stream.change(cleared)) == (2 if form == "ag-ui" else 1)


class CountingReader(JsonlReader):
    """A JSONL reader counting the follows still open: each is one stream's hold on the log."""

    def __init__(self, directory: Path) -> None:
        super().__init__(directory)
        self.open_follows = 0

    async def follow(
        self, name: str, *, after: int, since: Snapshot | None = None
    ) -> AsyncIterator[Event]:
        self.open_follows += 1
        try:
            async for event in super().follow(name, after=after, since=since):
                yield event
        finally:
            self.open_follows -= 1


@pytest.mark.parametrize("form", ["ag-ui", "ai-sdk"])
def test_a_client_vanishing_mid_stream_releases_its_follow(
    tmp_path: Path, live_server: Server, sse: Opener, form: str
) -> None:
    path = tmp_path / "s.jsonl"
    write_events(path, [plan_write(todo("A"))])
    reader = CountingReader(tmp_path)
    server = live_server(reader, ping=0.2)
    streams = [sse(url_of(server, form)) for _ in range(3)]
    for stream in streams:
        for _ in range(3 if form == "ag-ui" else 2):  # the start and the snapshot
            data_frame(stream)
    deadline = time.monotonic() + 10
    while reader.open_follows < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert reader.open_follows == 3

    for stream in streams[:2]:
        stream.close()  # gone without a word, mid-stream
    append(path, plan_write(todo("B")))

    deadline = time.monotonic() + 10
    while reader.open_follows > 1 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert reader.open_follows == 1
    frame = data_frame(streams[2])  # the stream left behind still gets every write
    assert frame.id == "1"


# --- what was asked, beside the plan (docs/requests.md) ---------------------------------------


@pytest.fixture
def place(store_place: str) -> str:
    """Where session ``ada`` is kept: a directory of JSONL logs, or a fresh database's URL."""
    return store_place


def agent_appends(place: str, *events: tuple[str, dict[str, Any]]) -> None:
    with open_session(place, "ada") as agent:
        for kind, data in events:
            agent.append(kind, data)


def agent_takes(place: str) -> list[str]:
    """What the agent's writer takes from the inbox before a model call, as adapters do."""
    with open_session(place, "ada") as agent:
        return [request.id for request in take_requests(agent)]


def next_plan(stream: SseStream, form: str) -> tuple[str | None, dict[str, Any]]:
    """The seq and content of the next plan sent; for AG-UI, the state frame after the
    activity says the same (a snapshot, or a delta of one ``add`` per key)."""
    frame = data_frame(stream)
    if form == "ai-sdk":
        return frame.id, frame.json()["data"]
    content = frame.json()["content"]
    state = data_frame(stream).json()
    if state["type"] == "STATE_SNAPSHOT":
        assert state["snapshot"] == content
    else:
        assert {op["path"][1:]: op["value"] for op in state["delta"]} == content
        assert [op["path"] for op in state["delta"]] == ["/" + key for key in content]
    return frame.id, content


@pytest.mark.parametrize("form", ["ag-ui", "ai-sdk"])
def test_what_was_asked_rides_beside_the_plan_pending_then_honoured(
    place: str, live_server: Server, sse: Opener, form: str
) -> None:
    agent_appends(place, TURN, plan_write(todo("A", "in_progress"), todo("B")))
    server = live_server(place)
    stream = sse(url_of(server, form, "ada"))
    data_frame(stream)  # the run (or message) starting
    plan = [todo("A", "in_progress"), todo("B")]
    assert next_plan(stream, form) == ("1", {"todos": plan})  # no request yet: as always

    asked = PlanRequests(place, "ada").file("done", "A", by="grace")
    assert agent_takes(place) == [asked.id]  # seq 2: request/taken, told
    seq, content = next_plan(stream, form)  # the plan again, as it is, with the request
    assert seq == "2"
    assert content["todos"] == plan
    (pending,) = content["requests"]
    assert pending == {
        **asked.as_json(),
        "status": "pending",
        "takenSeq": 2,
        "settledSeq": None,
        "notified": True,
    }
    late = sse(url_of(server, form, "ada"))  # a stream opened now shows it at once
    data_frame(late)
    assert next_plan(late, form) == ("2", content)

    done = [todo("A", "completed"), todo("B", "in_progress")]
    agent_appends(place, plan_write(*done))  # seq 3: its own frames carry the new list
    for opened in (stream, late):
        seq, content = next_plan(opened, form)
        assert seq == "3"
        assert content["todos"] == done
        assert [(r["id"], r["status"], r["settledSeq"]) for r in content["requests"]] == [
            (asked.id, "honoured", 3)
        ]

    # turn/end and a note leave the list as it was: nothing is sent; the next turn empties it
    agent_appends(place, ("turn/end", {}), NOTE, TURN)
    assert next_plan(stream, form) == ("6", {"todos": [], "requests": []})


@pytest.mark.parametrize("form", ["ag-ui", "ai-sdk"])
def test_a_request_event_that_changes_nothing_sends_nothing(form: WireFormat) -> None:
    stream = WireStream(form, "s")
    written = {"seq": 0, "type": EVENT_TYPE, "data": {"todos": [todo("A")]}}
    taken = {"id": "r1", "kind": "note", "content": "hi", "by": "ada", "planSeq": 0, "at": 1.0}
    assert len(stream.snapshot(Snapshot(0, written), [written])) == (2 if form == "ag-ui" else 1)
    assert stream.change({"seq": 1, "type": "turn/end", "data": {}}) == []

    frames = stream.change({"seq": 2, "type": "request/taken", "data": taken})
    assert stream.change({"seq": 3, "type": "turn/end", "data": {}}) == []  # a note waits on
    delivered = stream.change({"seq": 4, "type": "request/notified", "data": {"ids": ["r1"]}})

    for sent, status in ((frames, "pending"), (delivered, "delivered")):
        payload = json.loads(sent[0].data)
        content = payload["content" if form == "ag-ui" else "data"]
        assert content["todos"] == [todo("A")]
        assert [r["status"] for r in content["requests"]] == [status]
    assert [frame.id for frame in delivered] == ["4"] * len(delivered)


ASKED = HOSTILE.replace("\ud800", "")  # what a person may file: no lone surrogate


def test_an_ag_ui_client_and_the_ai_sdk_reader_take_the_plan_with_what_was_asked(
    tmp_path: Path, live_server: Server, node: Callable[..., NodeClient]
) -> None:
    agent_appends(str(tmp_path), plan_write(todo("A", "in_progress")))
    server = live_server(tmp_path, ping=0.1)
    agui = ag_ui(node, url_of(server, "ag-ui", "ada"), 3)
    ai = ai_sdk(node, url_of(server, "ai-sdk", "ada"), 3)
    agui.next()  # the run started
    first = (agui.next(), ai.next())

    asked = PlanRequests(tmp_path, "ada").file("add", ASKED, by="grace")
    agent_takes(str(tmp_path))
    second = (agui.next(), ai.next())
    agent_appends(str(tmp_path), plan_write(todo("A", "in_progress"), todo(ASKED)))
    third = (agui.next(), ai.next())

    assert first[0]["state"] == {"todos": [todo("A", "in_progress")]}
    assert first[1]["parts"][0]["data"] == {"todos": [todo("A", "in_progress")]}
    for (state, message), status in ((second, "pending"), (third, "honoured")):
        requests = state["state"]["requests"]
        assert [(r["id"], r["content"], r["status"]) for r in requests] == [
            (asked.id, ASKED, status)
        ]
        assert state["messages"][0]["content"] == state["state"]  # the activity says the same
        (part,) = message["parts"]
        assert part["data"] == state["state"]
    assert third[0]["state"]["todos"] == [todo("A", "in_progress"), todo(ASKED)]


def test_a_log_read_anew_after_a_request_was_seen_sends_the_list_again_even_empty() -> None:
    # A replaced log is read from its own snapshot: the client's copy of the list is replaced.
    stream = WireStream("ai-sdk", "s")
    taken = {"id": "r1", "kind": "add", "content": "B", "by": "ada", "planSeq": -1, "at": 1.0}
    recent = [{"seq": 0, "type": "request/taken", "data": taken}]
    (opening,) = stream.snapshot(Snapshot(0, None), recent)
    (anew,) = stream.snapshot(Snapshot(0, None), [])

    assert [r["status"] for r in json.loads(opening.data)["data"]["requests"]] == ["pending"]
    assert json.loads(anew.data)["data"] == {"todos": [], "requests": []}
