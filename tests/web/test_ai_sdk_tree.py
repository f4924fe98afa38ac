"""A lead session's AI SDK stream with its sub-agents (``?format=ai-sdk&tree=1``).

Read by the ``ai`` package's own reader under node (``parseJsonEventStream`` with
``uiMessageChunkSchema``, then ``readUIMessageStream``) and, over httpx, frame by frame; on
JSONL and PostgreSQL. The sub-agents are keyed and linked as the adapters key and link them
(``<parent>/<agent>@<call>`` in an owner registry's directory).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from dsh_tool_todo.core.contract import SESSION_END_EVENT_TYPE, TURN_START
from dsh_tool_todo.core.links import end_data
from dsh_tool_todo.stores.jsonl import JsonlSession
from tests._builders import one_item_plan

from ._fleet import CHECKER, LEAD, RESEARCHER, Store, jsonl_store, lead_with_a_helper
from .conftest import LiveServer, SseStream, todo, todos
from .test_wire_stream import NodeClient, data_frame, node_script

Server = Callable[..., LiveServer]
PART = "data-subagent-plan"


def tree_url(server: LiveServer, store: Store) -> str:
    return (
        f"{server.url}/api/sessions/{quote(store.name(LEAD), safe='')}/stream?format=ai-sdk&tree=1"
    )


def attributed(store: Store, key: str, parent: str, call: str, **rest: Any) -> dict[str, Any]:
    """A sub-agent's data part: who it is, then ``rest`` (its ``todos``, its ``end``)."""
    name = key.rpartition("/")[2].partition("@")[0]
    data = {
        "session": store.name(key),
        "name": name,
        "parent": store.name(parent),
        "parentCallId": call,
        "end": None,
        **rest,
    }
    return {"type": PART, "id": f"plan:{store.name(key)}", "data": data}


def test_each_sub_agent_is_a_data_part_of_its_own_and_the_lead_stays_as_it_is(
    store: Store, live_server: Server, sse: Callable[..., SseStream]
) -> None:
    store.append(LEAD, one_item_plan("Delegate"))
    store.append(RESEARCHER, one_item_plan("Search"), parent=LEAD, call_id="c1")
    stream = sse(tree_url(live_server(store.source), store))

    opening = [data_frame(stream).json() for _ in range(3)]
    assert opening == [
        {"type": "start", "messageId": f"plan:{store.name(LEAD)}"},
        # the lead's part, as the plain stream's
        {
            "type": "data-plan",
            "id": f"plan:{store.name(LEAD)}",
            "data": todos(todo("Delegate", "in_progress")),
        },
        attributed(store, RESEARCHER, LEAD, "c1", todos=[todo("Search", "in_progress")]),
    ]

    # linked while the stream is open, under the researcher: shows once it writes
    store.append(CHECKER, parent=RESEARCHER, call_id="r2")
    store.append(CHECKER, one_item_plan("Check"))
    checking = [todo("Check", "in_progress")]
    assert data_frame(stream).json() == attributed(store, CHECKER, RESEARCHER, "r2", todos=checking)
    store.append(CHECKER, (SESSION_END_EVENT_TYPE, end_data("failed", "crashed")))
    store.append(RESEARCHER, one_item_plan("Search", "completed"))
    store.append(RESEARCHER, (SESSION_END_EVENT_TYPE, end_data("finished")))
    later = [data_frame(stream).json() for _ in range(3)]
    searched = [todo("Search", "completed")]
    of_checker = [frame for frame in later if frame["id"].endswith(store.name(CHECKER))]
    assert of_checker == [
        attributed(
            store,
            CHECKER,
            RESEARCHER,
            "r2",
            todos=checking,
            end={"outcome": "failed", "error": "crashed"},
        ),
    ]
    of_researcher = [frame for frame in later if frame not in of_checker]
    assert of_researcher == [
        attributed(store, RESEARCHER, LEAD, "c1", todos=searched),
        attributed(store, RESEARCHER, LEAD, "c1", todos=searched, end={"outcome": "finished"}),
    ]
    # a turn of the researcher empties its part; the lead's stream goes on as ever
    store.append(RESEARCHER, (TURN_START, {}))
    store.append(LEAD, one_item_plan("Delegate", "completed"))
    last = sorted((data_frame(stream).json() for _ in range(2)), key=lambda frame: frame["type"])
    assert last[0]["data"] == todos(todo("Delegate", "completed"))
    assert last[1]["data"]["todos"] == []
    assert last[1]["data"]["end"] == {"outcome": "finished"}


def test_a_sub_agent_log_deleted_is_emptied_and_marked_unreadable(
    tmp_path: Path, live_server: Server, sse: Callable[..., SseStream]
) -> None:
    lead_with_a_helper(tmp_path)
    stream = sse(f"{live_server(tmp_path).url}/api/sessions/lead/stream?format=ai-sdk&tree=1")
    assert data_frame(stream).json()["type"] == "start"
    assert [data_frame(stream).json()["type"] for _ in range(2)] == ["data-plan", PART]
    (tmp_path / "helper.jsonl").unlink()
    gone = data_frame(stream).json()["data"]
    assert gone["todos"] == []
    assert gone["unreadable"] == {
        "message": "session 'helper': its log was deleted",
        "code": "session_deleted",
    }
    (tmp_path / "lead.jsonl").unlink()
    assert data_frame(stream).json() == {
        "type": "error",
        "errorText": "session 'lead': its log was deleted",
    }


# --- the `ai` package's reader under node ------------------------------------------------------


@pytest.fixture
def node() -> Iterator[Callable[..., NodeClient]]:
    """Starts a script of tests/node (the fixture's name marks the test ``node``)."""
    started: list[NodeClient] = []

    def start(script: str, package: str, *args: str) -> NodeClient:
        started.append(NodeClient([*node_script(script, package), *args]))
        return started[-1]

    yield start
    for client in started:
        client.close()


def parts_of(line: dict[str, Any]) -> dict[str, Any]:
    """A message line's parts by id: the data of each."""
    return {part["id"]: part for part in line.get("parts", [])}


def test_ai_sdk_reader_keeps_one_part_per_agent_each_attributed(
    tmp_path: Path, live_server: Server, node: Callable[..., NodeClient]
) -> None:
    store = jsonl_store(tmp_path)
    store.append(LEAD, one_item_plan("Delegate"))
    store.append(RESEARCHER, one_item_plan("Search"), parent=LEAD, call_id="c1")
    # neither is under the lead as `dsh-todo sessions` draws it: a parent not visible here,
    # and a sub-agent whose log is in another directory
    store.append("orphan", one_item_plan("Lost"), parent="ghost")
    elsewhere = tmp_path.parent / f"{tmp_path.name}-elsewhere"
    elsewhere.mkdir()
    with JsonlSession(elsewhere / "stray.jsonl", parent=store.name(LEAD)) as stray:
        stray.append(*one_item_plan("Elsewhere"))
    url = tree_url(live_server(tmp_path, ping=0.2), store)
    client = node("read_ui_message_stream.mjs", "ai", url, "1000")
    lead, researcher, checker = (f"plan:{store.name(key)}" for key in (LEAD, RESEARCHER, CHECKER))

    def until(wanted: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        while True:
            line = client.next()
            assert not {"invalid", "error"} & set(line), line
            if wanted(parts_of(line)):
                return parts_of(line)

    until(lambda parts: researcher in parts)
    # linked while the stream is open: shown within 2 s of its write
    store.append(CHECKER, parent=RESEARCHER, call_id="r2")
    written = time.monotonic()
    store.append(CHECKER, one_item_plan("Check"))
    until(lambda parts: checker in parts)
    assert time.monotonic() - written < 2.0
    store.append(CHECKER, (SESSION_END_EVENT_TYPE, end_data("failed", "checker crashed")))
    store.append(RESEARCHER, one_item_plan("Search", "completed"))
    store.append(RESEARCHER, (SESSION_END_EVENT_TYPE, end_data("finished")))
    parts = until(
        lambda parts: (
            checker in parts
            and parts[checker]["data"]["end"] is not None
            and parts[researcher]["data"]["end"] is not None
        )
    )

    # the reader kept one part per agent, replaced by id, each attributed to its agent
    assert set(parts) == {lead, researcher, checker}
    assert parts[lead] == {
        "type": "data-plan",
        "id": lead,
        "data": todos(todo("Delegate", "in_progress")),
    }
    assert parts[researcher] == attributed(
        store,
        RESEARCHER,
        LEAD,
        "c1",
        todos=[todo("Search", "completed")],
        end={"outcome": "finished"},
    )
    assert parts[checker] == attributed(
        store,
        CHECKER,
        RESEARCHER,
        "r2",
        todos=[todo("Check", "in_progress")],
        end={"outcome": "failed", "error": "checker crashed"},
    )
