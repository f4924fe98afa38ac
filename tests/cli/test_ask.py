"""``dsh-todo ask``: a request filed from the shell, listed, withdrawn; bad requests refused in
one line, filing nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dsh_tool_todo.core.contract import EVENT_TYPE
from dsh_tool_todo.stores._inbox import take_requests
from dsh_tool_todo.stores.jsonl import JsonlSession
from dsh_tool_todo.stores.requests import PlanRequests
from tests._builders import plan

from .test_cli import assert_usage_error, dsh_todo


@pytest.fixture
def logs(tmp_path: Path) -> Path:
    with JsonlSession(tmp_path / "ada.jsonl") as agent:
        agent.append(EVENT_TYPE, plan("Write the tests", "Ship it"))
    return tmp_path


def test_a_request_filed_from_the_shell_waits_for_the_agent(logs: Path) -> None:
    run = dsh_todo("ask", str(logs), "--session", "ada", "--done", "Ship it", "--by", "grace")
    assert run.stdout.endswith(
        'waiting      mark "Ship it" completed  (grace); the agent is told at its next model call '
        "of this turn\n"
    )
    (waiting,) = PlanRequests(logs, "ada").read().waiting
    assert (waiting.kind, waiting.content, waiting.by) == ("done", "Ship it", "grace")
    assert run.stdout.startswith(waiting.id)


def test_the_list_shows_waiting_and_taken_requests_and_json_for_programs(logs: Path) -> None:
    dsh_todo("ask", str(logs), "--session", "ada", "--add", "Tell the team", "--by", "grace")
    with JsonlSession(logs / "ada.jsonl") as agent:
        take_requests(agent)
    dsh_todo("ask", str(logs), "--session", "ada", "--note", "evil\x1b[2J", "--by", "grace")
    listed = dsh_todo("ask", str(logs), "--session", "ada", "--list").stdout.splitlines()
    assert [line.split()[1:3] for line in listed] == [["waiting", "note:"], ["pending", "add"]]
    assert "evil\\x1b[2J" in listed[0]  # shown literally: no escape reaches the terminal
    found = json.loads(dsh_todo("ask", str(logs), "--session", "ada", "--list", "--json").stdout)
    assert [r["content"] for r in found["waiting"]] == ["evil\x1b[2J"]
    assert [(r["kind"], r["status"]) for r in found["taken"]] == [("add", "pending")]


def test_a_request_withdrawn_from_the_shell_is_not_taken(logs: Path) -> None:
    filed = json.loads(
        dsh_todo("ask", str(logs), "--session", "ada", "--remove", "Ship it", "--json").stdout
    )
    run = dsh_todo("ask", str(logs), "--session", "ada", "--withdraw", filed["id"])
    assert run.stdout == f"withdrawn: {filed['id']}\n"
    with JsonlSession(logs / "ada.jsonl") as agent:
        assert take_requests(agent) == []


@pytest.mark.parametrize(
    ("args", "pattern"),
    [
        (("--done", "Deploy"), "the plan has no item 'Deploy'"),
        (("--add", "Ship it"), "already has 'Ship it'"),
        (("--note", "x" * 301), "at most 300 characters"),
        (("--withdraw", "nope"), "no pending request 'nope'"),
        (("--done", "Ship it", "--by", " "), "names who asks"),
        (("--done", "Ship it", "--note", "x"), "not allowed with argument"),
        ((), "one of the arguments --done --reopen --remove --add --note --withdraw --list"),
    ],
)
def test_a_bad_request_is_refused_in_one_line_and_files_nothing(
    logs: Path, args: tuple[str, ...], pattern: str
) -> None:
    assert_usage_error(dsh_todo("ask", str(logs), "--session", "ada", *args, check=False), pattern)
    assert not (logs / "ada.jsonl.requests").exists()


def test_show_prints_what_was_asked_under_the_plan(logs: Path) -> None:
    dsh_todo("ask", str(logs), "--session", "ada", "--done", "Write the tests", "--by", "grace")
    with JsonlSession(logs / "ada.jsonl") as agent:
        take_requests(agent)
        agent.append(EVENT_TYPE, plan("Ship it"))  # the agent dropped the item instead
    dsh_todo("ask", str(logs), "--session", "ada", "--note", "ship\nfriday", "--by", "grace")
    shown = dsh_todo("show", str(logs), "--session", "ada", "--no-health").stdout.splitlines()
    assert shown[-2:] == [
        "? note: ship\\nfriday (asked by grace): waiting",
        '? mark "Write the tests" completed (asked by grace): pending',
    ]


def test_a_log_named_by_hand_is_shown_and_asked_by_the_name_the_list_gives_it(
    tmp_path: Path,
) -> None:
    with JsonlSession(tmp_path / "Bob Smith.jsonl") as agent:
        agent.append(EVENT_TYPE, plan("Ship it"))
    listed = dsh_todo("sessions", str(tmp_path)).stdout
    assert listed.startswith("Bob Smith\t")
    shown = dsh_todo("show", str(tmp_path), "--session", "Bob Smith").stdout
    assert shown.startswith("☐ Ship it")
    dsh_todo("ask", str(tmp_path), "--session", "Bob Smith", "--done", "Ship it", "--by", "grace")
    with JsonlSession(tmp_path / "Bob Smith.jsonl") as agent:
        assert [r.content for r in take_requests(agent)] == ["Ship it"]
    # a session opened for the owner key writes the owner's own log, never the hand-named one
    from dsh_tool_todo.stores import open_session

    with open_session(tmp_path, "Bob Smith") as owner:
        owner.append(EVENT_TYPE, plan("Another"))
    assert len(list(tmp_path.glob("*.jsonl"))) == 2


def test_show_lists_what_was_asked_in_the_current_turn_as_watch_and_sessions_do(
    logs: Path,
) -> None:
    dsh_todo("ask", str(logs), "--session", "ada", "--done", "Ship it", "--by", "grace")
    with JsonlSession(logs / "ada.jsonl") as agent:
        take_requests(agent)
        agent.append(EVENT_TYPE, plan("Write the tests", "Ship it", status="completed"))
    shown = dsh_todo("show", str(logs), "--session", "ada", "--no-health").stdout.splitlines()
    assert shown[-1] == '? mark "Ship it" completed (asked by grace): honoured'
    with JsonlSession(logs / "ada.jsonl") as agent:
        agent.append("turn/start", {})  # a new turn: what the last one settled is not beside it
    shown = dsh_todo("show", str(logs), "--session", "ada", "--no-health").stdout.splitlines()
    assert not [line for line in shown if line.startswith("?")]
    sessions = json.loads(dsh_todo("sessions", str(logs), "--json").stdout)
    assert sessions["sessions"][0]["asked"] == []


def test_a_request_event_no_filer_could_write_crashes_no_command(logs: Path) -> None:
    taken = {"id": "huge", "kind": "note", "content": "x", "by": "eve", "planSeq": 0}
    with JsonlSession(logs / "ada.jsonl") as agent:
        agent.append("request/taken", {**taken, "at": 10**400, "told": True})
        agent.append("turn/end", {})
    with (logs / "ada.jsonl.requests").open("w") as inbox:
        inbox.write(json.dumps({**taken, "at": 10**400}) + "\n")
    assert dsh_todo("show", str(logs), "--session", "ada").stdout.startswith("☐ Write the tests")
    assert json.loads(dsh_todo("sessions", str(logs), "--json").stdout)["sessions"]
    assert dsh_todo("ask", str(logs), "--session", "ada", "--list").stdout == "No requests.\n"


def test_a_directory_where_a_sessions_log_would_be_is_refused_not_looked_into(
    tmp_path: Path,
) -> None:
    (tmp_path / "bob.jsonl").mkdir()
    with JsonlSession(tmp_path / "bob.jsonl" / "inner.jsonl") as agent:
        agent.append(EVENT_TYPE, plan("Ship it"))
    for command in (["ask", "--note", "hi"], ["show"]):
        run = dsh_todo(*command[:1], str(tmp_path), "--session", "bob", *command[1:], check=False)
        assert run.returncode == 2
        assert run.stderr.endswith("is a directory, not the log of session 'bob'\n")
    assert not list(tmp_path.rglob("*.requests"))
