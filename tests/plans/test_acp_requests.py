"""What was asked, beside the plan, in ACP: the lead's plan updates carry it in ``_meta``, under
``dsh-tool-todo/requests``, once the session has taken a request (docs/requests.md). Every
update is checked by the ``acp`` SDK's own models; the end-to-end ones go through the SDK's
client over a socket pair, on a directory and on PostgreSQL."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

import pytest
from acp.schema import (
    AgentPlanContentUpdate,
    AgentPlanRemovedUpdate,
    AgentPlanUpdate,
    SessionNotification,
)
from acp.utils import serialize_params

from dsh_tool_todo.core.contract import (
    EVENT_TYPE,
    REQUEST_TAKEN,
    SESSION_END_EVENT_TYPE,
    TURN_START,
)
from dsh_tool_todo.core.links import end_data
from dsh_tool_todo.host import MemorySession
from dsh_tool_todo.plans import wire
from dsh_tool_todo.plans.acp import forward_plans
from dsh_tool_todo.stores import open_reader, open_session
from dsh_tool_todo.stores._inbox import take_requests
from dsh_tool_todo.stores.requests import PlanRequests
from tests._builders import PLAN_A, PLAN_B, todos
from tests.plans.test_acp import connected, plan_lines, prompt, within
from tests.plans.test_acp_plans import LEAD, PLANS, TodoAgent

META = "dsh-tool-todo/requests"
LEAD_ID = f"plan:{LEAD}"  # the same in a directory and a database: its name needs no escape


@pytest.fixture
def place(store_place: str) -> str:
    """Where the sessions are kept: a directory of JSONL logs, or a fresh database's URL."""
    return store_place


def checked(notification: Mapping[str, Any]) -> dict[str, Any]:
    """``notification`` as JSON, after the SDK's models read it back: the update it carries is
    one of ACP's plan updates, ``_meta`` and all."""
    wire_form = json.loads(json.dumps(notification))
    parsed = SessionNotification.model_validate(wire_form)
    assert isinstance(
        parsed.update, (AgentPlanUpdate, AgentPlanContentUpdate, AgentPlanRemovedUpdate)
    )
    assert serialize_params(parsed) == wire_form
    return dict(wire_form["update"])


class Recorder:
    """Stands in for the SDK's agent-side connection: each update as the client reads it."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    async def session_update(self, session_id: str, update: Any) -> None:
        notification = SessionNotification(session_id=session_id, update=update)
        self.sent.append(checked(serialize_params(notification)))


class MetaClient:
    """An ACP client keeping each update as its SDK parsed it off the wire."""

    def __init__(self) -> None:
        self.updates: list[dict[str, Any]] = []

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        notification = SessionNotification(session_id=session_id, update=update)
        self.updates.append(checked(serialize_params(notification)))


def entries(plan: list[Any]) -> list[dict[str, str]]:
    return [{**item, "priority": "medium"} for item in plan]


def classic(plan: list[Any]) -> dict[str, Any]:
    return {"sessionUpdate": "plan", "entries": entries(plan)}


def update(plan: list[Any]) -> dict[str, Any]:
    items = {"type": "items", "planId": LEAD_ID, "entries": entries(plan)}
    return {"sessionUpdate": "plan_update", "plan": items}


REMOVED = {"sessionUpdate": "plan_removed", "planId": LEAD_ID}


def asked(sent: Mapping[str, Any]) -> list[tuple[str, str]]:
    return [(request["content"], request["status"]) for request in sent["_meta"][META]]


def without_meta(sent: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in sent.items() if key != "_meta"}


# ---- through the SDK's client, on each store ---------------------------------------------


async def ask_and_honour(agent: Any, place: str) -> str:
    """Between two prompts of the docs' agent: a person asks for PLAN_A's first item done, the
    lead's writer takes it, then the lead writes PLAN_B, which has it done."""
    lead, _, forwarder = agent.sessions[LEAD]
    request = await PlanRequests(place, LEAD).afile("done", "Read the code", by="grace")
    assert [taken.id for taken in take_requests(lead.session)] == [request.id]
    lead.session.append("message/assistant", {"text": "on it"})  # changes nothing: not sent
    await agent.host.acall_tool("todo_write", todos(*PLAN_B), agent=lead)
    await forwarder.drain()
    return request.id


@pytest.mark.parametrize("capabilities", [None, PLANS], ids=["classic", "identified"])
def test_a_real_client_sees_the_request_pending_then_honoured(
    place: str, capabilities: Any
) -> None:
    async def main() -> tuple[MetaClient, bytearray, str]:
        agent, client, sent = TodoAgent(json.loads, place), MetaClient(), bytearray()
        async with connected(agent, client, sent) as connection:
            await within(lambda: connection.initialize(1, client_capabilities=capabilities))
            await within(lambda: connection.new_session(cwd="/"))
            await within(lambda: connection.prompt(session_id=LEAD, prompt=prompt(todos(*PLAN_A))))
            request_id = await ask_and_honour(agent, place)
            await within(lambda: connection.prompt(session_id=LEAD, prompt=prompt()))
        return client, sent, request_id

    client, sent, request_id = asyncio.run(main())
    plan = classic if capabilities is None else update
    got = list(client.updates)
    if capabilities is not None:  # the first prompt's turn/start: no request seen yet
        assert got.pop(0) == REMOVED
    assert got[0] == plan(PLAN_A)  # as it always was
    assert without_meta(got[1]) == plan(PLAN_A)  # again, as it is, with what was asked
    assert asked(got[1]) == [("Read the code", "pending")]
    assert without_meta(got[2]) == plan(PLAN_B)
    assert asked(got[2]) == [("Read the code", "honoured")]
    (request,) = got[2]["_meta"][META]
    assert (request["id"], request["kind"], request["by"]) == (request_id, "done", "grace")
    assert request["settledSeq"] > request["takenSeq"]
    # the next turn: the settled request leaves the list, and the client's copy empties
    last = classic(PLAN_B) if capabilities is None else REMOVED
    assert got[3] == {**last, "_meta": {META: []}}
    assert len(got) == 4
    # what went over the wire, line by line, is what the client read
    assert [checked(json.loads(line)["params"]) for line in plan_lines(sent)] == client.updates


# ---- what the forwarder sends, against a recording connection --------------------------


def taken(seq: int, kind: str, content: str, plan_seq: int) -> dict[str, Any]:
    data = {"id": f"r{seq}", "kind": kind, "content": content, "by": "grace", "planSeq": plan_seq}
    return {**data, "at": 1.5, "told": True}


def test_a_removed_plan_is_removed_again_with_each_new_list() -> None:
    async def main() -> list[dict[str, Any]]:
        session, connection = MemorySession(), Recorder()
        forwarder = forward_plans(
            session, connection, "acp-1", client_capabilities=PLANS, session_key=LEAD
        )
        session.append(TURN_START, {})  # 0
        session.append(REQUEST_TAKEN, taken(1, "add", "Tell the team", 0))  # while removed
        session.append(
            EVENT_TYPE, todos(*PLAN_A, {"content": "Tell the team", "status": "pending"})
        )
        session.append(TURN_START, {})  # 3: the honoured request leaves the list
        session.append(SESSION_END_EVENT_TYPE, end_data("finished"))
        await forwarder.drain()
        return connection.sent

    sent = asyncio.run(main())
    assert sent[0] == REMOVED
    assert sent[1] == {**REMOVED, "_meta": {META: sent[1]["_meta"][META]}}
    assert asked(sent[1]) == [("Tell the team", "pending")]
    assert without_meta(sent[2])["sessionUpdate"] == "plan_update"
    assert asked(sent[2]) == [("Tell the team", "honoured")]
    assert sent[3] == {**REMOVED, "_meta": {META: []}}
    assert sent[4] == {**REMOVED, "_meta": {META: []}}  # the end removes it too, as it stands
    assert len(sent) == 5


def test_the_classic_plan_waits_for_a_write_and_keeps_it_over_a_turn_start() -> None:
    async def main() -> list[dict[str, Any]]:
        session, connection = MemorySession(), Recorder()
        forwarder = forward_plans(session, connection, "acp-1")
        session.append(TURN_START, {})
        session.append(REQUEST_TAKEN, taken(1, "note", "Mind the tests", 0))  # no plan sent yet
        session.append(EVENT_TYPE, todos(*PLAN_A))
        session.append("request/withdrawn", {"id": "r1"})  # a note is delivered: no change
        session.append(TURN_START, {})  # the note leaves the list; the client keeps its plan
        await forwarder.drain()
        return connection.sent

    sent = asyncio.run(main())
    assert without_meta(sent[0]) == classic(PLAN_A)
    assert asked(sent[0]) == [("Mind the tests", "delivered")]
    assert sent[1] == {**classic(PLAN_A), "_meta": {META: []}}
    assert len(sent) == 2


@pytest.mark.parametrize("capabilities", [None, PLANS], ids=["classic", "identified"])
def test_with_a_reader_what_was_asked_before_is_sent_at_once(place: str, capabilities: Any) -> None:
    with open_session(place, LEAD) as session:
        session.append(EVENT_TYPE, todos(*PLAN_A))
    request = PlanRequests(place, LEAD).file("done", "Read the code", by="grace")
    with open_session(place, LEAD) as session:
        take_requests(session)

    async def main() -> list[dict[str, Any]]:
        reader, connection = open_reader(place), Recorder()
        with open_session(place, LEAD) as session:
            forwarder = forward_plans(
                session, connection, "acp-1", client_capabilities=capabilities, reader=reader
            )
            await forwarder.drain()
            session.append(EVENT_TYPE, todos(*PLAN_B))
            await forwarder.drain()
            await forwarder.aclose()
        await reader.aclose()
        return connection.sent

    sent = asyncio.run(main())
    plan = classic if capabilities is None else update
    assert without_meta(sent[0]) == plan(PLAN_A)  # the log's plan, with what was asked
    assert [(r["id"], r["status"]) for r in sent[0]["_meta"][META]] == [(request.id, "pending")]
    assert without_meta(sent[1]) == plan(PLAN_B)
    assert asked(sent[1]) == [("Read the code", "honoured")]
    assert len(sent) == 2


# ---- the converters ------------------------------------------------------------------------


def test_the_converters_put_the_requests_in_meta_and_leave_it_out_without() -> None:
    request = {"id": "r1", "kind": "add", "content": "Ship <it>", "by": "grace", "planSeq": -1}
    request |= {"at": 1.5, "status": "pending", "takenSeq": 0, "settledSeq": None}
    event = {"seq": 1, "type": EVENT_TYPE, "data": todos(*PLAN_A)}
    cleared = {"seq": 2, "type": TURN_START, "data": {}}
    for payload, model in [
        (wire.acp_plan(event, requests=[request]), AgentPlanUpdate),
        (wire.acp_plan_operation(LEAD, event, requests=[request]), AgentPlanContentUpdate),
        (wire.acp_plan_operation(LEAD, cleared, requests=[request]), AgentPlanRemovedUpdate),
    ]:
        assert payload["_meta"] == {META: [request]}
        parsed = model.model_validate(payload)
        assert parsed.field_meta == {META: [request]}
        assert parsed.model_dump(mode="json", by_alias=True, exclude_none=True) == payload
    assert wire.acp_plan(event) == classic(PLAN_A)
    assert "_meta" not in wire.acp_plan_operation(LEAD, event)
    assert wire.acp_plan_operation(LEAD, cleared) == REMOVED


def test_a_log_that_cannot_be_read_at_the_start_fails_the_drain_and_plans_still_go() -> None:
    class BrokenReader:
        async def tail(self, name: str, **kwargs: Any) -> Any:
            raise OSError(f"cannot read {name}")

    async def main() -> list[dict[str, Any]]:
        session, connection = MemorySession(), Recorder()
        reader: Any = BrokenReader()
        forwarder = forward_plans(session, connection, "acp-1", reader=reader, session_key=LEAD)
        with pytest.raises(OSError, match=f"cannot read {LEAD}"):
            await forwarder.drain()
        session.append(EVENT_TYPE, todos(*PLAN_A))
        await forwarder.drain()
        return connection.sent

    assert asyncio.run(main()) == [classic(PLAN_A)]
