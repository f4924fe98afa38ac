"""ACP's identified plans: one plan per agent, a lead and its sub-agents, to a client that
declares ``plan`` in its capabilities; the classic ``plan`` of the lead to any other."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from acp.schema import (
    AgentPlanContentUpdate,
    AgentPlanRemovedUpdate,
    AgentPlanUpdate,
    ClientCapabilities,
    PlanCapabilities,
    SessionNotification,
)
from acp.utils import serialize_params
from psycopg.conninfo import conninfo_to_dict

import dsh_tool_todo
from dsh_tool_todo.core.contract import SESSION_END_EVENT_TYPE, TURN_START
from dsh_tool_todo.core.links import end_data
from dsh_tool_todo.errors import InvalidLog, UsageError
from dsh_tool_todo.host import Host, MemorySession
from dsh_tool_todo.plans.acp import forward_plans
from dsh_tool_todo.stores import open_reader, open_session, postgres
from dsh_tool_todo.stores.owners import owner_file_name
from tests._builders import PLAN, options, todo, todos
from tests.plans.test_acp import (
    LEGACY_BYTES,
    REFUSED_THEN_EMPTY,
    TodoAgent,
    connected,
    plan_lines,
    prompt,
    within,
)
from tests.stores.conftest import fresh_database

PLANS = ClientCapabilities(plan=PlanCapabilities())
LEAD, RESEARCHER, CRITIC = "session-1", "session-1/researcher@call_1", "session-1/critic@call_2"


class Recorder:
    """Stands in for the SDK's agent-side connection: each update as the client would read it."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    async def session_update(self, session_id: str, update: Any) -> None:
        self.sent.append(
            serialize_params(SessionNotification(session_id=session_id, update=update))
        )


def _entries(*items: tuple[str, str]) -> list[dict[str, str]]:
    return [
        {"content": content, "priority": "medium", "status": status} for content, status in items
    ]


def _update(plan_id: str, *items: tuple[str, str]) -> dict[str, Any]:
    return {
        "sessionUpdate": "plan_update",
        "plan": {"type": "items", "planId": plan_id, "entries": _entries(*items)},
    }


def _removed(plan_id: str) -> dict[str, Any]:
    return {"sessionUpdate": "plan_removed", "planId": plan_id}


# ---- which client gets what -------------------------------------------------------


@pytest.mark.parametrize(
    "capabilities",
    [PLANS, {"plan": {}}, ClientCapabilities(plan=PlanCapabilities(_meta={"x": 1}))],
)
def test_a_client_that_declares_plan_gets_identified_plans(capabilities: Any) -> None:
    async def main() -> list[dict[str, Any]]:
        session, connection = MemorySession(), Recorder()
        forwarder = forward_plans(
            session, connection, "acp-1", client_capabilities=capabilities, session_key="lead"
        )
        session.append("todo/write", todos(todo("Ship", "in_progress")))
        session.append("todo/write", todos())
        session.append(TURN_START, {})
        session.append("session/link", {"parent": "x"})  # neither plan nor end: not sent
        session.append(SESSION_END_EVENT_TYPE, end_data("failed", "boom"))
        await forwarder.drain()
        await forwarder.aclose()
        return connection.sent

    assert asyncio.run(main()) == [
        {"sessionId": "acp-1", "update": _update("plan:lead", ("Ship", "in_progress"))},
        {"sessionId": "acp-1", "update": _update("plan:lead")},
        {"sessionId": "acp-1", "update": _removed("plan:lead")},
        {"sessionId": "acp-1", "update": _removed("plan:lead")},
    ]


@pytest.mark.parametrize(
    "capabilities", [None, ClientCapabilities(), {}, {"plan": None}, {"fs": {}}]
)
def test_any_other_client_gets_the_leads_classic_plan_only(capabilities: Any) -> None:
    async def main() -> list[dict[str, Any]]:
        session, connection = MemorySession(), Recorder()
        forwarder = forward_plans(
            session, connection, "acp-1", client_capabilities=capabilities, session_key="lead"
        )
        session.append("todo/write", todos(todo("Ship", "in_progress")))
        session.append(TURN_START, {})
        session.append(SESSION_END_EVENT_TYPE, end_data("finished"))
        await forwarder.drain()
        return connection.sent

    assert asyncio.run(main()) == [
        {
            "sessionId": "acp-1",
            "update": {"sessionUpdate": "plan", "entries": _entries(("Ship", "in_progress"))},
        }
    ]


def test_the_plan_id_is_the_session_key_else_the_acp_session_id(tmp_path: Path) -> None:
    async def main() -> list[str]:
        connection = Recorder()
        with open_session(tmp_path, "stored") as stored:
            keyed = forward_plans(stored, connection, "acp-1", client_capabilities=PLANS)
            stored.append("todo/write", todos(todo("a")))
            await keyed.drain()
            memory = MemorySession()
            unkeyed = forward_plans(memory, connection, "acp-2", client_capabilities=PLANS)
            memory.append("todo/write", todos(todo("b")))
            await unkeyed.drain()
        return [sent["update"]["plan"]["planId"] for sent in connection.sent]

    assert asyncio.run(main()) == ["plan:stored", "plan:acp-2"]


@pytest.mark.parametrize(
    ("capabilities", "message"),
    [
        ("plan", r"client_capabilities must be the ClientCapabilities the client sent"),
        (42, r"initialize \(or their JSON\), or None, not int"),
        ({"plan": True}, r"client_capabilities' plan must be an object \(\{\}: plans supported\)"),
    ],
)
def test_capabilities_that_are_none_are_refused(capabilities: Any, message: str) -> None:
    async def main() -> None:
        with pytest.raises(UsageError, match=message):
            forward_plans(MemorySession(), Recorder(), "s", client_capabilities=capabilities)

    asyncio.run(main())


def test_an_empty_session_key_is_refused() -> None:
    async def main() -> None:
        with pytest.raises(UsageError, match=r"session_key must be a non-empty string"):
            forward_plans(
                MemorySession(), Recorder(), "s", client_capabilities=PLANS, session_key=""
            )

    asyncio.run(main())


# ---- a lead and two sub-agents, through the SDK's own client over a socket pair ----------


class PanelClient:
    """An editor's plan panel: one plan per planId, the classic plan per session."""

    def __init__(self) -> None:
        self.notifications: list[dict[str, Any]] = []
        self.panel: dict[str, list[tuple[str, str]]] = {}
        self.classic: dict[str, list[tuple[str, str]]] = {}

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.notifications.append(
            serialize_params(SessionNotification(session_id=session_id, update=update))
        )
        if isinstance(update, AgentPlanContentUpdate):
            self.panel[update.plan.plan_id] = [(e.content, e.status) for e in update.plan.entries]
        elif isinstance(update, AgentPlanRemovedUpdate):
            self.panel.pop(update.plan_id, None)
        elif isinstance(update, AgentPlanUpdate):
            self.classic[session_id] = [(e.content, e.status) for e in update.entries]

    def updates(self) -> list[dict[str, Any]]:
        return [n["update"] for n in self.notifications]


def _ids() -> tuple[str, str, str]:
    """The plan ids of the lead and its two sub-agents: ``plan:`` and each session's key in the
    directory, its log's name (as ``dsh-todo sessions`` lists it)."""
    lead, researcher, critic = (
        "plan:" + owner_file_name(key).removesuffix(".jsonl") for key in (LEAD, RESEARCHER, CRITIC)
    )
    return lead, researcher, critic


def _delegate(name: str, call: str, *items: tuple[str, str]) -> dict[str, Any]:
    """A sub-agent's write, run in the lead's tool call ``call``."""
    return {"agent": name, "call": call, **todos(*(todo(c, s) for c, s in items))}


# session-1: the lead plans, delegates to two sub-agents, each writes, and the lead moves on
FIRST_TURN = (
    todos(*PLAN[1:]),
    _delegate("researcher", "call_1", ("Read the sources", "in_progress")),
    _delegate("critic", "call_2", ("Review", "pending")),
    _delegate("researcher", "call_1", ("Read the sources", "completed")),
    todos(*PLAN),
)


async def _until(condition: Callable[[], bool], what: str) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 10
    while not condition():
        assert loop.time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)


async def _write(agent: Any, session_id: str, name: str, call: str, plan: Mapping[str, Any]) -> str:
    """A sub-agent's write made outside any prompt, as another task of the agent would."""
    sub = agent.sub_agent(session_id, name, call)
    reply: str = await agent.host.acall_tool("todo_write", dict(plan), agent=sub)
    return reply


def test_three_agents_three_plans_each_update_to_its_own_id(tmp_path: Path) -> None:
    lead, researcher, critic = _ids()

    async def main() -> PanelClient:
        agent, client = TodoAgent(json.loads, str(tmp_path)), PanelClient()
        async with connected(agent, client) as connection:
            await within(lambda: connection.initialize(1, client_capabilities=PLANS))
            await within(lambda: connection.new_session(cwd="/"))
            await within(lambda: connection.prompt(session_id=LEAD, prompt=prompt(*FIRST_TURN)))
            # drained before the answer: every agent's plan is on the panel already
            assert client.panel == {
                lead: [(i["content"], i["status"]) for i in PLAN],
                researcher: [("Read the sources", "completed")],
                critic: [("Review", "pending")],
            }
            sent = client.updates()
            assert sent[0] == _removed(lead)  # the turn's start: the lead has no plan yet
            # a sub-agent's plan as it stood when it was found, then each write after
            researchers = [u for u in sent if u.get("plan", {}).get("planId") == researcher]
            assert researchers in (
                [_update(researcher, ("Read the sources", "completed"))],
                [
                    _update(researcher, ("Read the sources", "in_progress")),
                    _update(researcher, ("Read the sources", "completed")),
                ],
            )
            assert [u for u in sent if u.get("plan", {}).get("planId") == critic] == [
                _update(critic, ("Review", "pending"))
            ]
            assert [u for u in sent if u.get("plan", {}).get("planId") == lead] == [
                _update(lead, *((i["content"], i["status"]) for i in PLAN[1:])),
                _update(lead, *((i["content"], i["status"]) for i in PLAN)),
            ]
            assert {n["sessionId"] for n in client.notifications} == {LEAD}
            assert not client.classic

            # the critic's run ends: its plan goes, live, with no prompt to drain it
            critic_session = agent.sub_agent(LEAD, "critic", "call_2").session
            critic_session.append(SESSION_END_EVENT_TYPE, end_data("finished"))
            await _until(lambda: critic not in client.panel, "the critic's plan_removed")
            assert client.updates()[-1] == _removed(critic)

            # a new turn clears the lead's plan; the researcher's stays
            await within(lambda: connection.prompt(session_id=LEAD, prompt=prompt()))
            assert client.updates()[-1] == _removed(lead)
            assert client.panel == {researcher: [("Read the sources", "completed")]}
        return client

    client = asyncio.run(main())
    ids = {u["planId"] if "planId" in u else u["plan"]["planId"] for u in client.updates()}
    assert ids == {lead, researcher, critic}


def test_a_sub_agent_linked_while_forwarding_runs_is_found_and_followed(tmp_path: Path) -> None:
    async def main() -> None:
        agent, client = TodoAgent(json.loads, str(tmp_path)), PanelClient()
        async with connected(agent, client) as connection:
            await within(lambda: connection.initialize(1, client_capabilities=PLANS))
            await within(lambda: connection.new_session(cwd="/"))
            await within(lambda: connection.prompt(session_id=LEAD, prompt=prompt(todos(*PLAN))))
            # linked and written between prompts: no drain, found through the reader's changes
            await _write(agent, LEAD, "late", "call_9", todos(todo("Arrive", "in_progress")))
            late = f"plan:{agent.sub_agent(LEAD, 'late', 'call_9').session.key}"
            await _until(lambda: late in client.panel, "the late sub-agent's plan")
            assert client.panel[late] == [("Arrive", "in_progress")]
            await _write(agent, LEAD, "late", "call_9", todos(todo("Arrive", "completed")))
            await _until(lambda: client.panel[late] == [("Arrive", "completed")], "its next write")
            # a sub-agent of the sub-agent is in the lead's tree too
            with open_session(tmp_path, "deeper") as deeper:
                deeper.link(agent.sub_agent(LEAD, "late", "call_9").session.key)
                deeper.append("todo/write", todos(todo("Dig", "pending")))
                await _until(lambda: "plan:deeper" in client.panel, "the grandchild's plan")
            # a session of another lead is not
            with (
                open_session(tmp_path, "other") as other,
                open_session(tmp_path, "other-child") as child,
            ):
                child.link(other.key)
                child.append("todo/write", todos(todo("Elsewhere", "pending")))
                await within(lambda: connection.prompt(session_id=LEAD, prompt=prompt()))
            assert "plan:other-child" not in client.panel

    asyncio.run(main())


def test_the_ids_are_the_same_after_a_reconnect(tmp_path: Path) -> None:
    lead, researcher, critic = _ids()

    async def first() -> None:
        agent, client = TodoAgent(json.loads, str(tmp_path)), PanelClient()
        async with connected(agent, client) as connection:
            await within(lambda: connection.initialize(1, client_capabilities=PLANS))
            await within(lambda: connection.new_session(cwd="/"))
            await within(lambda: connection.prompt(session_id=LEAD, prompt=prompt(*FIRST_TURN)))
            critic_session = agent.sub_agent(LEAD, "critic", "call_2").session
            critic_session.append(SESSION_END_EVENT_TYPE, end_data("failed", "gave up"))

    async def again() -> PanelClient:
        # a new connection, a new agent, the same logs: session-1 is opened again
        agent, client = TodoAgent(json.loads, str(tmp_path)), PanelClient()
        async with connected(agent, client) as connection:
            await within(lambda: connection.initialize(1, client_capabilities=PLANS))
            await within(lambda: connection.new_session(cwd="/"))
            await within(lambda: connection.prompt(session_id=LEAD, prompt=prompt()))
        return client

    asyncio.run(first())
    client = asyncio.run(again())
    # the researcher's plan as it stands, under the id it had; the critic's run had ended
    # (the lead's turn and the sub-agents' listing run side by side: either may come first)
    assert sorted(client.updates(), key=_text) == sorted(
        [_removed(lead), _update(researcher, ("Read the sources", "completed"))], key=_text
    )
    assert critic not in client.panel


def test_the_classic_client_gets_only_the_leads_plan_byte_for_byte(tmp_path: Path) -> None:
    """The same writes as tests/plans/test_acp.py's end to end, sub-agents interleaved: a
    client that does not declare ``plan`` gets the bytes it got before identified plans."""

    async def main() -> tuple[PanelClient, bytearray]:
        agent, client, sent = TodoAgent(json.loads, str(tmp_path)), PanelClient(), bytearray()
        async with connected(agent, client, sent) as connection:
            await within(lambda: connection.initialize(protocol_version=1))
            await within(lambda: connection.new_session(cwd="/"))
            await within(lambda: connection.new_session(cwd="/"))
            await within(lambda: connection.prompt(session_id=LEAD, prompt=prompt(*FIRST_TURN)))
            await _write(agent, LEAD, "late", "call_9", todos(todo("Arrive", "pending")))
            agent.sub_agent(LEAD, "critic", "call_2").session.append(
                SESSION_END_EVENT_TYPE, end_data("finished")
            )
            await within(
                lambda: connection.prompt(
                    session_id="session-2", prompt=prompt(*REFUSED_THEN_EMPTY)
                )
            )
        return client, sent

    client, sent = asyncio.run(main())
    assert plan_lines(sent) == LEGACY_BYTES
    assert not client.panel


def test_a_sub_agent_log_that_cannot_be_read_fails_the_next_drain(tmp_path: Path) -> None:
    async def main() -> None:
        host = Host([dsh_tool_todo], options(False))
        reader = open_reader(tmp_path)
        with (
            open_session(tmp_path, "lead") as lead_session,
            open_session(tmp_path, "broken") as broken,
        ):
            broken.link("lead")
            lead = host.new_agent(lead_session)
            connection = Recorder()
            forwarder = forward_plans(
                lead.session, connection, "acp", client_capabilities=PLANS, reader=reader
            )
            await forwarder.drain()
            with open(tmp_path / "broken.jsonl", "ab") as log:
                log.write(b'{"seq": 1, "type": "todo/write", "data": {"todos": "no"}}\n')
            failure = r"broken\.jsonl, line 2: .*`todos` must be an array"
            with pytest.raises(InvalidLog, match=failure):
                await _drain_until_it_fails(forwarder)
            await forwarder.drain()  # reported once
            host.call_tool("todo_write", todos(todo("Still here")), agent=lead)
            await forwarder.drain()
            assert connection.sent[-1]["update"] == _update("plan:lead", ("Still here", "pending"))
            await forwarder.aclose()
        await reader.aclose()

    asyncio.run(main())


def test_stopping_ends_every_follower(tmp_path: Path) -> None:
    async def main() -> None:
        reader = open_reader(tmp_path)
        with open_session(tmp_path, "lead") as lead, open_session(tmp_path, "child") as child:
            child.link("lead")
            child.append("todo/write", todos(todo("x")))
            connection = Recorder()
            forwarder = forward_plans(
                lead, connection, "acp", client_capabilities=PLANS, reader=reader
            )
            await forwarder.drain()
            assert connection.sent == [
                {"sessionId": "acp", "update": _update("plan:child", ("x", "pending"))}
            ]
            assert len(asyncio.all_tasks()) > 1  # the watcher and the child's follower
            await forwarder.aclose()
            assert asyncio.all_tasks() == {asyncio.current_task()}
            await forwarder.drain()  # stopped: nothing to wait for
        await reader.aclose()

    asyncio.run(main())


def _text(update: Mapping[str, Any]) -> str:
    return json.dumps(update, sort_keys=True)


async def _drain_until_it_fails(forwarder: Any) -> None:
    """Drain until a drain raises (a follower reads its log on its own time)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 10
    while True:
        await forwarder.drain()
        assert loop.time() < deadline, "timed out waiting for a drain to fail"
        await asyncio.sleep(0.01)


def test_a_sub_agent_found_after_its_end_is_shown_only_if_written_again(tmp_path: Path) -> None:
    """As ``dsh-todo sessions`` reads an end: the newest of the plan events and ends."""

    async def main() -> list[dict[str, Any]]:
        reader = open_reader(tmp_path)
        with (
            open_session(tmp_path, "lead") as lead,
            open_session(tmp_path, "done") as done,
            open_session(tmp_path, "again") as again,
        ):
            for child in (done, again):
                child.link("lead")
                child.append("todo/write", todos(todo("first")))
                child.append(SESSION_END_EVENT_TYPE, end_data("finished"))
            again.append("todo/write", todos(todo("retried", "in_progress")))
            done.append("session/link", {"parent": "lead"})  # after the end: not a plan event
            connection = Recorder()
            forwarder = forward_plans(
                lead, connection, "acp", client_capabilities=PLANS, reader=reader
            )
            await forwarder.drain()
            await forwarder.aclose()
        await reader.aclose()
        return connection.sent

    assert asyncio.run(main()) == [
        {"sessionId": "acp", "update": _update("plan:again", ("retried", "in_progress"))}
    ]


@pytest.fixture
def database_url() -> Iterator[str]:
    """A ``postgresql://`` URL of a fresh, set-up database of this test's own."""
    with fresh_database() as conninfo:
        postgres.setup(conninfo)
        params = conninfo_to_dict(conninfo)
        user = f"{params['user']}@" if "user" in params else ""
        yield f"postgresql://{user}{params['host']}:{params['port']}/{params['dbname']}"


def test_the_tree_of_a_database_too(database_url: str) -> None:
    """The same agent on PostgreSQL: the reader decides what a key is, not the forwarder."""
    lead, researcher, critic = (f"plan:{key}" for key in (LEAD, RESEARCHER, CRITIC))

    async def main() -> None:
        agent, client = TodoAgent(json.loads, database_url), PanelClient()
        async with connected(agent, client) as connection:
            await within(lambda: connection.initialize(1, client_capabilities=PLANS))
            await within(lambda: connection.new_session(cwd="/"))
            await within(lambda: connection.prompt(session_id=LEAD, prompt=prompt(*FIRST_TURN)))
            assert client.panel == {
                lead: [(i["content"], i["status"]) for i in PLAN],
                researcher: [("Read the sources", "completed")],
                critic: [("Review", "pending")],
            }
            critic_session = agent.sub_agent(LEAD, "critic", "call_2").session
            critic_session.append(SESSION_END_EVENT_TYPE, end_data("finished"))
            await _until(lambda: critic not in client.panel, "the critic's plan_removed")
            await within(lambda: connection.prompt(session_id=LEAD, prompt=prompt()))
            assert client.panel == {researcher: [("Read the sources", "completed")]}

    asyncio.run(main())
