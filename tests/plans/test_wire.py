"""The wire converters: each object validated by the protocol's own published models.

AG-UI by ``ag-ui-protocol``'s pydantic models, A2A by ``a2a-sdk``'s protobuf
types, ACP by ``agent-client-protocol``'s models, the AI SDK chunk by the ``ai``
package's ``uiMessageChunkSchema`` and ``readUIMessageStream`` under node
(tests/node: ``npm ci --prefix tests/node``). All from the dev extra or
tests/node; a missing one fails the test, never skips it.
"""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest
from a2a.types import TaskArtifactUpdateEvent
from acp.schema import AgentPlanContentUpdate, AgentPlanRemovedUpdate, AgentPlanUpdate
from ag_ui.core import ActivitySnapshotEvent, StateDeltaEvent, StateSnapshotEvent
from google.protobuf.json_format import MessageToDict, ParseDict
from pydantic import BaseModel

from dsh_tool_todo.core.contract import CALL_ID_KEY, EVENT_TYPE
from dsh_tool_todo.core.contract import TURN_START as TURN_START_TYPE
from dsh_tool_todo.core.projection import PLAN_EVENTS
from dsh_tool_todo.errors import UsageError
from dsh_tool_todo.host import Host, HostAgent
from dsh_tool_todo.plans import wire
from tests._builders import PLAN, make_event, todo, todo_write, todos, turn_start

NODE_DIR = Path(__file__).parents[1] / "node"
# Text a UI must receive exactly as written: markup, entities, line and bidi controls.
HOSTILE = '<img src=x onerror=alert(1)> &amp; \u2028 \u202e\x1b[2J "quoted" 計画'


WRITTEN = todo_write(*PLAN, seq=1)
TURN_START = turn_start(seq=9)


def strict(model: type[BaseModel], produced: dict[str, Any]) -> BaseModel:
    """Validate with the published model, and check it keeps every field as sent.

    The AG-UI and ACP models allow unknown fields, so validation alone would
    accept a misspelt key: the round trip back to the wire form catches it.
    """
    parsed = model.model_validate(produced)
    assert not parsed.model_extra, f"fields the model does not define: {parsed.model_extra}"
    assert parsed.model_dump(mode="json", by_alias=True, exclude_none=True) == produced
    return parsed


def parse_a2a(produced: dict[str, Any]) -> TaskArtifactUpdateEvent:
    """The A2A JSON form parsed into a2a-sdk's protobuf type (unknown fields raise)."""
    json.dumps(produced)  # the wire form, not just a dict
    event = ParseDict(produced, TaskArtifactUpdateEvent())
    # proto3 leaves a false bool off its JSON form: `append: false` is sent explicitly
    assert produced["append"] is False
    assert MessageToDict(event) == {key: produced[key] for key in produced if key != "append"}
    return event


# --- AG-UI -----------------------------------------------------------------------------------


def test_an_ag_ui_activity_snapshot_validates_and_replaces_one_plan_per_session() -> None:
    first = wire.ag_ui_activity_snapshot("agent-1", WRITTEN)
    parsed = strict(ActivitySnapshotEvent, dict(first))
    assert isinstance(parsed, ActivitySnapshotEvent)
    assert parsed.activity_type == "PLAN"
    assert parsed.replace is True
    assert parsed.message_id == "plan:agent-1"
    assert parsed.content == {"todos": PLAN}
    later = wire.ag_ui_activity_snapshot("agent-1", todo_write(*PLAN[:1], seq=2))
    assert later["messageId"] == first["messageId"]
    assert wire.ag_ui_activity_snapshot("agent-2", WRITTEN)["messageId"] == "plan:agent-2"


def test_ag_ui_state_snapshot_and_delta_validate_and_set_the_todos_key() -> None:
    snapshot = wire.ag_ui_state_snapshot(WRITTEN)
    assert isinstance(strict(StateSnapshotEvent, dict(snapshot)), StateSnapshotEvent)
    assert snapshot["snapshot"] == {"todos": PLAN}
    delta = wire.ag_ui_state_delta(WRITTEN)
    parsed = strict(StateDeltaEvent, dict(delta))
    assert isinstance(parsed, StateDeltaEvent)
    assert delta["delta"] == [{"op": "add", "path": "/todos", "value": PLAN}]


def apply_add(state: dict[str, Any], patch: list[dict[str, Any]]) -> dict[str, Any]:
    """RFC 6902 ``add`` on an object member: set it, existing or not (section 4.1)."""
    state = copy.deepcopy(state)
    for operation in patch:
        assert operation["op"] == "add"
        assert operation["path"].count("/") == 1, "a top-level member"
        state[operation["path"][1:]] = copy.deepcopy(operation["value"])
    return state


def test_the_state_delta_replaces_the_plan_and_leaves_the_rest_of_the_state() -> None:
    state: dict[str, Any] = {"cursor": 3}
    state = apply_add(state, wire.ag_ui_state_delta(WRITTEN)["delta"])
    assert state == {"cursor": 3, "todos": PLAN}
    state = apply_add(state, wire.ag_ui_state_delta(todo_write(*PLAN[1:], seq=2))["delta"])
    assert state == {"cursor": 3, "todos": PLAN[1:]}
    state = apply_add(state, wire.ag_ui_state_delta(TURN_START)["delta"])
    assert state == {"cursor": 3, "todos": []}


# --- A2A -------------------------------------------------------------------------------------


def test_an_a2a_artifact_update_parses_into_the_sdks_protobuf_type() -> None:
    produced = wire.a2a_artifact_update(WRITTEN, task_id="task-1", context_id="ctx-1")
    event = parse_a2a(dict(produced))
    assert event.task_id == "task-1"
    assert event.context_id == "ctx-1"
    assert event.append is False
    assert event.last_chunk is True
    assert event.artifact.artifact_id == "plan"
    assert len(event.artifact.parts) == 1
    part = event.artifact.parts[0]
    assert part.media_type == "application/json"
    assert MessageToDict(part.data) == {"todos": PLAN}


def test_a2a_needs_the_tasks_ids() -> None:
    with pytest.raises(UsageError, match=r"task_id must be the A2A task's non-empty id string"):
        wire.a2a_artifact_update(PLAN, task_id="", context_id="ctx")
    with pytest.raises(UsageError, match=r"context_id must be the A2A task's non-empty id"):
        wire.a2a_artifact_update(PLAN, task_id="task", context_id=None)  # type: ignore[arg-type]


# --- ACP -------------------------------------------------------------------------------------


def test_the_acp_plan_update_and_plan_operations_validate_with_the_sdks_models() -> None:
    strict(AgentPlanUpdate, dict(wire.acp_plan(WRITTEN)))
    assert wire.acp_plan(TURN_START) == {"sessionUpdate": "plan", "entries": []}
    update = wire.acp_plan_operation("agent-1", WRITTEN, priority="high")
    parsed = strict(AgentPlanContentUpdate, dict(update))
    assert isinstance(parsed, AgentPlanContentUpdate)
    assert parsed.plan.plan_id == "plan:agent-1"  # type: ignore[union-attr]
    assert [entry.priority for entry in parsed.plan.entries] == ["high"] * 3  # type: ignore[union-attr]
    removed = wire.acp_plan_operation("agent-1", TURN_START)
    strict(AgentPlanRemovedUpdate, dict(removed))
    assert removed == {"sessionUpdate": "plan_removed", "planId": "plan:agent-1"}
    assert wire.acp_plan_operation("agent-1", None) == removed
    emptied = wire.acp_plan_operation("agent-1", todo_write(seq=1))
    assert emptied["sessionUpdate"] == "plan_update", "a written empty list is a plan, not removal"


# --- every format ----------------------------------------------------------------------------

CONVERTERS: dict[str, Callable[[wire.PlanSource], Any]] = {
    "ag-ui activity": lambda source: wire.ag_ui_activity_snapshot("s", source)["content"],
    "ag-ui state snapshot": lambda source: wire.ag_ui_state_snapshot(source)["snapshot"],
    "ag-ui state delta": lambda source: {
        "todos": wire.ag_ui_state_delta(source)["delta"][0]["value"]
    },
    "a2a": lambda source: wire.a2a_artifact_update(source, task_id="t", context_id="c")["artifact"][
        "parts"
    ][0]["data"],
    "ai-sdk": lambda source: wire.ai_sdk_data_part("s", source)["data"],
    "acp": lambda source: {
        "todos": [
            {"content": entry["content"], "status": entry["status"]}
            for entry in wire.acp_plan(source)["entries"]
        ]
    },
}


@pytest.mark.parametrize("name", sorted(CONVERTERS))
def test_every_format_carries_the_plan_and_clears_on_turn_start(name: str) -> None:
    convert = CONVERTERS[name]
    assert convert(WRITTEN) == {"todos": PLAN}
    assert convert(PLAN) == {"todos": PLAN}, "a plan converts as its todo/write does"
    assert convert(TURN_START) == {"todos": []}
    assert convert(None) == {"todos": []}


@pytest.mark.parametrize("name", sorted(CONVERTERS))
def test_content_passes_through_as_text_and_the_output_is_fresh(name: str) -> None:
    event = todo_write(todo(HOSTILE, "in_progress"), seq=1)
    before = copy.deepcopy(event)
    produced = CONVERTERS[name](event)
    assert produced == todos(todo(HOSTILE, "in_progress"))
    assert json.loads(json.dumps(produced)) == produced
    produced["todos"][0]["content"] = "changed by a consumer"
    assert event == before, "the converter shares nothing with the event"


def test_every_format_converts_the_events_a_host_records(host: Host, agent: HostAgent) -> None:
    host.call_tool("todo_write", todos(*PLAN), agent=agent)
    agent.session.append(TURN_START_TYPE, {})
    recorded = [event for event in agent.session.events if event["type"] in PLAN_EVENTS]
    assert [event["type"] for event in recorded] == [EVENT_TYPE, TURN_START_TYPE]
    written, cleared = recorded
    strict(ActivitySnapshotEvent, dict(wire.ag_ui_activity_snapshot("main", written)))
    strict(StateDeltaEvent, dict(wire.ag_ui_state_delta(cleared)))
    parse_a2a(dict(wire.a2a_artifact_update(written, task_id="t", context_id="c")))
    assert wire.ai_sdk_data_part("main", written)["data"] == {"todos": PLAN}
    strict(AgentPlanRemovedUpdate, dict(wire.acp_plan_operation("main", cleared)))


def test_an_event_that_leaves_the_plan_as_it_is_is_refused_by_name() -> None:
    for convert in CONVERTERS.values():
        with pytest.raises(UsageError, match=r"a 'turn/end' event leaves the plan as it is"):
            convert({"seq": 3, "type": "turn/end", "data": {}})


def test_a_list_the_tool_could_not_have_recorded_is_refused() -> None:
    with pytest.raises(UsageError, match=r"todo at index 0: `status` must be one of"):
        wire.ai_sdk_data_part("s", todo_write(todo("x", "done"), seq=1))
    with pytest.raises(UsageError, match=r"needs data \{'todos': \[\.\.\.\]\}"):
        wire.ai_sdk_data_part("s", make_event(EVENT_TYPE))
    with pytest.raises(
        UsageError, match=r"needs data \{'todos': \[\.\.\.\]\}, got \{'todos': None\}"
    ):
        wire.ai_sdk_data_part("s", make_event(EVENT_TYPE, {"todos": None}))
    with pytest.raises(UsageError, match=r"todos must be a list of \{content, status\}, not str"):
        wire.ag_ui_state_snapshot("write the parser")  # type: ignore[arg-type]


# What every reader refuses in a logged write, each with the words the refusal names.
UNRECORDABLE = {
    "an item key the tool refuses": (
        todos({"content": "Ship", "status": "pending", "activeForm": "Shipping"}),
        r"unknown key `activeForm`",
    ),
    "a data key beside todos": (
        {**todos(todo("Ship")), "x": 1},
        r"data must be \{todos: \[\.\.\.\]\}",
    ),
    "a callId that is not a string": (
        {**todos(todo("Ship")), CALL_ID_KEY: 5},
        r"optionally with a non-empty string callId",
    ),
}


@pytest.mark.parametrize("name", sorted(CONVERTERS))
@pytest.mark.parametrize("case", sorted(UNRECORDABLE))
def test_a_write_every_reader_refuses_is_refused_not_stripped(name: str, case: str) -> None:
    data, words = UNRECORDABLE[case]
    with pytest.raises(UsageError, match=rf"event at seq 4: the tool could not .*{words}"):
        CONVERTERS[name](make_event(EVENT_TYPE, data, seq=4))


@pytest.mark.parametrize("name", sorted(CONVERTERS))
def test_a_plan_with_an_item_key_the_tool_refuses_is_refused_not_stripped(name: str) -> None:
    extra = [{"content": "Ship", "status": "pending", "activeForm": "Shipping"}]
    with pytest.raises(UsageError, match=r"the plan: .*unknown key `activeForm`"):
        CONVERTERS[name](extra)


def test_a_write_with_a_call_id_and_a_plan_of_any_sequence_of_mappings_convert() -> None:
    with_id = make_event(EVENT_TYPE, {**todos(*PLAN), CALL_ID_KEY: "call-1"}, seq=2)
    assert wire.ai_sdk_data_part("s", with_id)["data"] == {"todos": PLAN}
    as_tuple = tuple(MappingProxyType(item) for item in PLAN)
    assert wire.ag_ui_state_snapshot(as_tuple)["snapshot"] == {"todos": PLAN}


@pytest.mark.parametrize("name", sorted(CONVERTERS))
def test_duplicate_or_empty_content_the_tool_refuses_is_refused_here_too(name: str) -> None:
    twice = [{"content": "Ship", "status": "pending"}, {"content": "Ship", "status": "pending"}]
    with pytest.raises(UsageError, match=r"at seq 1: .*duplicate content \"Ship\""):
        CONVERTERS[name](todo_write(*twice, seq=1))
    with pytest.raises(UsageError, match=r"the plan: .*`content` must be a non-empty string"):
        CONVERTERS[name]([{"content": "", "status": "pending"}])


@pytest.mark.parametrize("key", ["", None, 7])
def test_the_session_key_must_name_the_session(key: object) -> None:
    with pytest.raises(UsageError, match=r"session_key must be a non-empty string"):
        wire.ai_sdk_data_part(key, PLAN)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match=r"session_key must be a non-empty string"):
        wire.ag_ui_activity_snapshot(key, PLAN)  # type: ignore[arg-type]


def test_a_hostile_session_key_stays_inside_its_id() -> None:
    key = 'a"b\n/c<d>'
    assert wire.ai_sdk_data_part(key, PLAN)["id"] == "plan:" + key
    assert wire.plan_id(key) == "plan:" + key


# --- the AI SDK, under node ------------------------------------------------------------------


def read_with_ai_sdk(chunks: list[Any]) -> dict[str, Any]:
    node = shutil.which("node")
    assert node is not None, "node is not installed: install Node.js >= 18 (apt-get install nodejs)"
    assert (NODE_DIR / "node_modules" / "ai").is_dir(), (
        f"the AI SDK is not installed for the node tests: run `npm ci --prefix {NODE_DIR}`"
    )
    run = subprocess.run(
        [node, str(NODE_DIR / "read_plan_stream.mjs")],
        input=json.dumps(chunks),
        capture_output=True,
        text=True,
        timeout=120,
        cwd=NODE_DIR,
    )
    assert run.returncode == 0, run.stderr
    result: dict[str, Any] = json.loads(run.stdout)
    return result


@pytest.mark.node
def test_the_ai_sdk_reads_data_plan_chunks_and_keeps_one_part_per_session() -> None:
    second = [{"content": HOSTILE, "status": "in_progress"}]
    chunks = [
        wire.ai_sdk_data_part("main", WRITTEN),
        wire.ai_sdk_data_part("other", todo_write(*PLAN[:1], seq=1)),
        wire.ai_sdk_data_part("main", todo_write(*second, seq=2)),
        wire.ai_sdk_data_part("other", TURN_START),
    ]
    result = read_with_ai_sdk([*chunks, {"type": "data-plan"}])  # the last one: no data
    assert [entry["index"] for entry in result["invalid"]] == [4, "sse"], result["invalid"]
    assert result["parts"] == [
        {"type": "data-plan", "id": "plan:main", "data": {"todos": second}},
        {"type": "data-plan", "id": "plan:other", "data": {"todos": []}},
    ]


@pytest.mark.parametrize(
    "source",
    [WRITTEN, todo_write(seq=1), TURN_START, None],
    ids=["a write", "an empty write", "turn/start", "no plan"],
)
def test_the_cleared_and_empty_forms_validate_too(source: Any) -> None:
    strict(ActivitySnapshotEvent, dict(wire.ag_ui_activity_snapshot("k", source)))
    strict(StateSnapshotEvent, dict(wire.ag_ui_state_snapshot(source)))
    strict(StateDeltaEvent, dict(wire.ag_ui_state_delta(source)))
    parse_a2a(dict(wire.a2a_artifact_update(source, task_id="t", context_id="c")))
    strict(AgentPlanUpdate, dict(wire.acp_plan(source)))
    operation = dict(wire.acp_plan_operation("k", source))
    removed = operation["sessionUpdate"] == "plan_removed"
    strict(AgentPlanRemovedUpdate if removed else AgentPlanContentUpdate, operation)


def test_the_converters_import_no_framework() -> None:
    heavy = ("asyncio", "ag_ui", "a2a", "google.protobuf", "acp", "pydantic_ai", "langchain")
    code = (
        f"import sys, dsh_tool_todo.plans.wire\nprint([m for m in {heavy!r} if m in sys.modules])"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]"


def test_an_event_built_in_python_with_a_tuple_of_mappings_converts() -> None:
    built = make_event(EVENT_TYPE, {"todos": tuple(MappingProxyType(item) for item in PLAN)})
    assert wire.ai_sdk_data_part("s", built)["data"] == {"todos": PLAN}
    extra = make_event(EVENT_TYPE, {"todos": ({"content": "a", "status": "pending", "x": 1},)})
    with pytest.raises(UsageError, match=r"unknown key `x`"):
        wire.acp_plan(extra)


# --- what was asked, beside the plan ---------------------------------------------------------

ASKED = [
    {
        "id": "6ef9d129c975cc21",
        "kind": "done",
        "content": HOSTILE,
        "by": "grace",
        "planSeq": 1,
        "at": 1796450181.8,
        "status": "pending",
        "takenSeq": 2,
        "settledSeq": None,
        "notified": True,
    }
]


def test_requests_ride_beside_the_plan_in_every_format_and_validate() -> None:
    with_requests = {"todos": PLAN, "requests": ASKED}
    activity = wire.ag_ui_activity_snapshot("s", WRITTEN, requests=ASKED)
    assert strict(ActivitySnapshotEvent, dict(activity)).content == with_requests  # type: ignore[attr-defined]
    snapshot = wire.ag_ui_state_snapshot(WRITTEN, requests=ASKED)
    assert strict(StateSnapshotEvent, dict(snapshot)).snapshot == with_requests  # type: ignore[attr-defined]
    delta = wire.ag_ui_state_delta(WRITTEN, requests=ASKED)
    strict(StateDeltaEvent, dict(delta))
    assert apply_add({"cursor": 3}, delta["delta"]) == {"cursor": 3, **with_requests}
    update = wire.a2a_artifact_update(WRITTEN, task_id="t", context_id="c", requests=ASKED)
    (part,) = parse_a2a(dict(update)).artifact.parts
    assert MessageToDict(part.data) == with_requests
    assert wire.ai_sdk_data_part("s", WRITTEN, requests=ASKED)["data"] == with_requests


def test_an_empty_list_of_requests_is_sent_and_none_leaves_the_key_out() -> None:
    assert wire.ag_ui_state_snapshot(TURN_START, requests=[])["snapshot"] == {
        "todos": [],
        "requests": [],
    }
    assert wire.ag_ui_state_delta(TURN_START, requests=[])["delta"][1] == {
        "op": "add",
        "path": "/requests",
        "value": [],
    }
    for name, convert in CONVERTERS.items():
        assert convert(WRITTEN) == {"todos": PLAN}, name
    assert len(wire.ag_ui_state_delta(WRITTEN, requests=None)["delta"]) == 1


def test_the_requests_sent_are_fresh_and_must_be_a_list_of_mappings() -> None:
    given = copy.deepcopy(ASKED)
    part = wire.ai_sdk_data_part("s", WRITTEN, requests=given)
    part["data"]["requests"][0]["status"] = "changed by a consumer"
    assert given == ASKED
    with pytest.raises(UsageError, match=r"requests must be a list of requests, .* not str"):
        wire.ai_sdk_data_part("s", WRITTEN, requests="r1")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match=r"each request is a mapping, not int"):
        wire.ag_ui_state_delta(WRITTEN, requests=[1])  # type: ignore[list-item]


@pytest.mark.node
def test_the_ai_sdk_reads_a_data_plan_part_with_requests() -> None:
    chunk = wire.ai_sdk_data_part("main", WRITTEN, requests=ASKED)
    result = read_with_ai_sdk([chunk])
    assert result == {"invalid": [], "parts": [chunk]}
