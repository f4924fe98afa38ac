"""A lead session's AG-UI stream with its sub-agents (``?format=ag-ui&tree=1``).

Read by ``@ag-ui/client`` under node (its ``runAgent`` verifies every event before applying
it) and, over httpx, by ``ag-ui-protocol``'s models, every frame validated field for field;
on JSONL and PostgreSQL. The sub-agents are keyed and linked as the adapters key and link
them (``<parent>/<agent>@<call>`` in an owner registry's directory).
"""

from __future__ import annotations

import queue
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from ag_ui.core import Event as AgUiEvent
from pydantic import TypeAdapter

from dsh_tool_todo.core.contract import SESSION_END_EVENT_TYPE
from dsh_tool_todo.core.links import end_data
from tests._builders import one_item_plan

from ._fleet import CHECKER, LEAD, RESEARCHER, Store, jsonl_store, lead_with_a_helper
from .conftest import LiveServer, SseStream, run_requests, todo, todos
from .test_wire_stream import NODE_DIR, NodeClient, data_frame, node_script

Server = Callable[..., LiveServer]
Append = Callable[..., None]  # (key, *events, parent=None, call_id=None)

EVENTS: TypeAdapter[Any] = TypeAdapter(AgUiEvent)


def valid(payload: dict[str, Any]) -> dict[str, Any]:
    """``payload`` as ag-ui-protocol parses it: a known event, no field it does not define,
    and the same JSON back."""
    parsed = EVENTS.validate_python(payload)
    assert not parsed.model_extra, f"fields the model does not define: {parsed.model_extra}"
    assert parsed.model_dump(mode="json", by_alias=True, exclude_none=True) == payload
    return payload


def tree_url(server: LiveServer, store: Store, key: str = LEAD) -> str:
    from urllib.parse import quote

    return f"{server.url}/api/sessions/{quote(store.name(key), safe='')}/stream?format=ag-ui&tree=1"


# --- ag-ui-protocol's models, every frame -----------------------------------------------------


def test_every_frame_of_a_tree_stream_is_a_valid_ag_ui_event(
    store: Store, live_server: Server, sse: Callable[..., SseStream]
) -> None:
    store.append(LEAD, one_item_plan("Delegate"))
    store.append(RESEARCHER, one_item_plan("Search"), parent=LEAD, call_id="c1")
    stream = sse(tree_url(live_server(store.source), store))
    researcher = store.name(RESEARCHER)

    opening = [valid(data_frame(stream).json()) for _ in range(5)]
    assert [frame["type"] for frame in opening] == [
        "RUN_STARTED",
        "ACTIVITY_SNAPSHOT",
        "STATE_SNAPSHOT",
        "SUBAGENT_STARTED",
        "ACTIVITY_SNAPSHOT",
    ]
    assert "subagentRunId" not in opening[1]  # the lead's own plan, as the plain stream's
    assert opening[3] == {
        "type": "SUBAGENT_STARTED",
        "subagentRunId": researcher,
        "name": "researcher",
        "parentToolCallId": "c1",
    }
    assert opening[4]["subagentRunId"] == researcher
    assert opening[4]["messageId"] == f"plan:{researcher}"

    # linked while the stream is open: it shows once it writes
    store.append(CHECKER, parent=RESEARCHER, call_id="r2")
    store.append(
        CHECKER, one_item_plan("Check"), (SESSION_END_EVENT_TYPE, end_data("failed", "crashed"))
    )
    store.append(RESEARCHER, one_item_plan("Search", "completed"))
    store.append(RESEARCHER, (SESSION_END_EVENT_TYPE, end_data("finished")))
    later = [valid(data_frame(stream).json()) for _ in range(5)]
    checker = store.name(CHECKER)
    of = sorted((frame["type"], frame.get("subagentRunId")) for frame in later)
    assert of == sorted(
        [
            ("SUBAGENT_STARTED", checker),
            ("ACTIVITY_SNAPSHOT", checker),
            ("SUBAGENT_ERROR", checker),
            ("ACTIVITY_SNAPSHOT", researcher),
            ("SUBAGENT_FINISHED", researcher),
        ]
    )
    started = next(frame for frame in later if frame["type"] == "SUBAGENT_STARTED")
    assert started["parentSubagentRunId"] == researcher
    error = next(frame for frame in later if frame["type"] == "SUBAGENT_ERROR")
    assert (error["message"], error["code"]) == ("crashed", "delegated_run_failed")


def test_the_leads_plan_in_a_tree_stream_says_what_was_asked_beside_it(
    store: Store, live_server: Server, sse: Callable[..., SseStream]
) -> None:
    from dsh_tool_todo.stores import open_session
    from dsh_tool_todo.stores._inbox import take_requests
    from dsh_tool_todo.stores.requests import PlanRequests

    store.append(LEAD, one_item_plan("Delegate"))
    store.append(RESEARCHER, one_item_plan("Search"), parent=LEAD, call_id="c1")
    lead = store.name(LEAD)
    asked = PlanRequests(store.source, lead).file("note", "use staging", by="grace")
    with open_session(store.source, lead) as session:  # taken before the stream opens
        assert [r.id for r in take_requests(session)] == [asked.id]
    stream = sse(tree_url(live_server(store.source), store))

    frames = [valid(data_frame(stream).json()) for _ in range(5)]
    lead_activity, state = frames[1], frames[2]
    assert "subagentRunId" not in lead_activity
    assert state["snapshot"] == lead_activity["content"]
    assert [(r["id"], r["status"]) for r in state["snapshot"]["requests"]] == [
        (asked.id, "delivered")  # a note told to the model at once
    ]
    assert "requests" not in frames[4]["content"]  # the sub-agent's plan goes as it was

    store.append(LEAD, ("turn/start", {}))  # the next turn: nothing asked in it yet
    cleared = [valid(data_frame(stream).json()) for _ in range(2)]
    assert cleared[0]["content"] == {"todos": [], "requests": []}
    assert cleared[1]["delta"][1] == {"op": "add", "path": "/requests", "value": []}


def test_a_plain_stream_is_unchanged_and_tree_is_checked(
    tmp_path: Path, store: Store, live_server: Server, sse: Callable[..., SseStream]
) -> None:
    store.append(LEAD, one_item_plan("Delegate"))
    store.append(RESEARCHER, one_item_plan("Search"), parent=LEAD, call_id="c1")
    server = live_server(store.source)
    plain = sse(tree_url(server, store).replace("&tree=1", "&tree=0"))
    assert [data_frame(plain).json()["type"] for _ in range(3)] == [
        "RUN_STARTED",
        "ACTIVITY_SNAPSHOT",
        "STATE_SNAPSHOT",
    ]
    store.append(RESEARCHER, one_item_plan("Search", "completed"))
    store.append(LEAD, one_item_plan("Delegate", "completed"))
    assert data_frame(plain).json()["content"] == todos(todo("Delegate", "completed"))

    from dsh_tool_todo.web.app import create_app

    async def ask(client: Any) -> list[tuple[int, str]]:
        answers = []
        for query in ("tree=1", "format=ag-ui&tree=yes", "format=ag-ui&tree=1&tree=1"):
            response = await client.get(f"/api/sessions/{LEAD}/stream?{query}")
            answers.append((response.status_code, response.json()["error"]))
        return answers

    app = create_app(store.source)
    answers = run_requests(app, ask)
    assert [status for status, _ in answers] == [400] * 3
    assert "`tree=1` goes with `format=ag-ui` or `format=ai-sdk`" in answers[0][1]
    assert answers[1][1] == "`tree` must be 1 or 0 (got 'yes')"
    assert answers[2][1].startswith("give `tree` once")


def test_the_lead_log_deleted_ends_the_run_with_run_error_with_sub_agents_still_active(
    tmp_path: Path, live_server: Server, sse: Callable[..., SseStream]
) -> None:
    lead_with_a_helper(tmp_path)
    stream = sse(f"{live_server(tmp_path).url}/api/sessions/lead/stream?format=ag-ui&tree=1")
    assert [valid(data_frame(stream).json())["type"] for _ in range(5)][-2:] == [
        "SUBAGENT_STARTED",
        "ACTIVITY_SNAPSHOT",
    ]
    (tmp_path / "lead.jsonl").unlink()
    assert valid(data_frame(stream).json()) == {
        "type": "RUN_ERROR",
        "message": "session 'lead': its log was deleted",
        "code": "session_deleted",
    }


# --- @ag-ui/client under node -----------------------------------------------------------------


class TreeClient(NodeClient):
    """read_ag_ui_tree.mjs: one JSON line per sub-agent event and per change of the messages;
    ``stop()`` aborts its run."""

    def __init__(self, url: str) -> None:
        self.process = subprocess.Popen(
            [*node_script("read_ag_ui_tree.mjs", "@ag-ui/client"), url],
            cwd=NODE_DIR,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
        )
        self.seen: list[dict[str, Any]] = []
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def until(self, wanted: Callable[[dict[str, Any]], bool], within: float = 20.0) -> float:
        """Read lines until one is ``wanted``; the seconds it took."""
        start = time.monotonic()
        while True:
            line = self.next(within=max(0.05, within - (time.monotonic() - start)))
            self.seen.append(line)
            if wanted(line):
                return time.monotonic() - start

    def stop(self) -> list[str]:
        """Abort the run; every event type the client saw, in order."""
        assert self.process.stdin is not None
        self.process.stdin.write("stop\n")
        self.process.stdin.flush()
        self.until(lambda line: "done" in line or "error" in line)
        last = self.seen[-1]
        assert "done" in last, last
        seen: list[str] = last["done"]
        return seen


def activities(line: dict[str, Any]) -> dict[str, tuple[str | None, list[str]]]:
    """The activity messages a ``messages`` line holds: id → (subagentRunId, its items as
    ``content:status``)."""
    return {
        message["id"]: (
            message.get("subagentRunId"),
            [f"{item['content']}:{item['status']}" for item in message["content"]["todos"]],
        )
        for message in line.get("messages", [])
        if message["role"] == "activity"
    }


def started(key: str) -> Callable[[dict[str, Any]], bool]:
    return lambda line: (
        line.get("subagent", {}).get("type") == "SUBAGENT_STARTED"
        and line["subagent"]["subagentRunId"] == key
    )


def showing(name: str, item: str) -> Callable[[dict[str, Any]], bool]:
    """A ``messages`` line whose activity of session ``name`` holds ``item`` (content:status)."""
    return lambda line: item in activities(line).get(f"plan:{name}", (None, []))[1]


@pytest.fixture
def tree_client() -> Iterator[Callable[[str], TreeClient]]:
    clients: list[TreeClient] = []

    def start(url: str) -> TreeClient:
        clients.append(TreeClient(url))
        return clients[-1]

    yield start
    for client in clients:
        client.close()


def test_ag_ui_client_shows_three_plan_activities_each_attributed_to_its_agent(
    tmp_path: Path, live_server: Server, tree_client: Callable[[str], TreeClient]
) -> None:
    store = jsonl_store(tmp_path)
    lead, researcher, checker = (store.name(key) for key in (LEAD, RESEARCHER, CHECKER))
    store.append(LEAD, one_item_plan("Delegate"))
    store.append(RESEARCHER, one_item_plan("Search"), parent=LEAD, call_id="c1")
    client = tree_client(
        f"{live_server(tmp_path, ping=0.2).url}/api/sessions/lead/stream?format=ag-ui&tree=1"
    )
    client.until(showing(researcher, "Search:in_progress"))

    # linked while the stream is open, under the researcher: shown within 2 s of its write
    store.append(CHECKER, parent=RESEARCHER, call_id="r2")
    written = time.monotonic()
    store.append(CHECKER, one_item_plan("Check"))
    client.until(showing(checker, "Check:in_progress"))
    assert time.monotonic() - written < 2.0
    store.append(RESEARCHER, one_item_plan("Search", "completed"))
    written = time.monotonic()
    client.until(showing(researcher, "Search:completed"))
    assert time.monotonic() - written < 2.0
    store.append(CHECKER, (SESSION_END_EVENT_TYPE, end_data("failed", "checker crashed")))
    client.until(lambda line: line.get("subagent", {}).get("type") == "SUBAGENT_ERROR")
    store.append(RESEARCHER, (SESSION_END_EVENT_TYPE, end_data("finished")))
    client.until(lambda line: line.get("subagent", {}).get("type") == "SUBAGENT_FINISHED")
    types = client.stop()

    last_messages = [line for line in client.seen if "messages" in line][-1]
    assert activities(last_messages) == {
        f"plan:{lead}": (None, ["Delegate:in_progress"]),
        f"plan:{researcher}": (researcher, ["Search:completed"]),
        f"plan:{checker}": (checker, ["Check:in_progress"]),
    }
    events = [line["subagent"] for line in client.seen if "subagent" in line]
    assert events == [
        {
            "type": "SUBAGENT_STARTED",
            "subagentRunId": researcher,
            "name": "researcher",
            "parentToolCallId": "c1",
        },
        {
            "type": "SUBAGENT_STARTED",
            "subagentRunId": checker,
            "name": "checker",
            "parentSubagentRunId": researcher,
            "parentToolCallId": "r2",
        },
        {
            "type": "SUBAGENT_ERROR",
            "subagentRunId": checker,
            "message": "checker crashed",
            "code": "delegated_run_failed",
        },
        {"type": "SUBAGENT_FINISHED", "subagentRunId": researcher},
    ]
    # every event the server sent was applied (the verifier failed none), the run never
    # finished on its own, and the client's abort is its own RUN_ERROR
    assert types[:3] == ["RUN_STARTED", "ACTIVITY_SNAPSHOT", "STATE_SNAPSHOT"]
    assert types.count("ACTIVITY_SNAPSHOT") == 4
    assert types.count("SUBAGENT_STARTED") == 2
    assert "RUN_FINISHED" not in types
    assert types[-1] == "RUN_ERROR"
