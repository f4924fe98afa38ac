"""A person's requests on the session page, in Chromium: filed from it (``dsh-todo serve
--requests``), and listed read-only by a plain ``dsh-todo serve``.

The test plays the person (clicks, fields) and the agent (its writer takes the inbox and
writes the plan), over a JSONL directory and over PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Dialog, Page, expect
from psycopg.conninfo import conninfo_to_dict

from dsh_tool_todo.stores import postgres
from dsh_tool_todo.stores._inbox import take_requests
from dsh_tool_todo.stores.jsonl import JsonlSession
from dsh_tool_todo.stores.requests import PlanRequests

from ...stores.conftest import fresh_database
from ..conftest import TURN, ServeProcess, todo
from .conftest import PageErrors

Starter = Callable[..., ServeProcess]
SETTLE_MS = 2000  # the longest the page may take to show a request settled
# Taking a request writes no plan, so no frame tells the page: its next poll (every 2 s while
# a request is open) shows it, later on a loaded machine: waited for, not timed.
POLL_MS = 15_000
HOSTILE = "<img src=x onerror=alert(1)> bell \x07 escape \x1b[31m \u202e reversed"
HOSTILE_SHOWN = "<img src=x onerror=alert(1)> bell \\u0007 escape \\u001b[31m \\u202e reversed"


@dataclass
class Agent:
    """A served session and its one writer, which the test drives as the agent would."""

    source: str  # what `dsh-todo serve` and PlanRequests take
    name: str  # the session's name on the page
    session: Any

    def write(self, *items: dict[str, str]) -> None:
        self.session.append("todo/write", {"todos": list(items)})

    def take(self) -> list[str]:
        """What a model call's hook does first: take the inbox; the contents taken."""
        return [request.content for request in take_requests(self.session)]


@pytest.fixture(params=["jsonl", pytest.param("postgres", marks=pytest.mark.postgres)])
def agent(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Agent]:
    if request.param == "jsonl":
        with JsonlSession(tmp_path / "live.jsonl") as session:
            yield Agent(str(tmp_path), "live", session)
        return
    with fresh_database() as conninfo:
        postgres.setup(conninfo)
        params = conninfo_to_dict(conninfo)
        url = f"postgresql://{params['user']}@{params['host']}:{params['port']}/{params['dbname']}"
        with postgres.PostgresSession(conninfo, "agent-7") as session:
            yield Agent(url, "agent-7", session)


@pytest.fixture
def served(agent: Agent, serve_process: Starter) -> Iterator[ServeProcess]:
    child = serve_process(agent.source, "--requests")
    yield child
    child.process.kill()  # before a database is dropped under it
    child.process.wait(timeout=10)


def item(page: Page, content: str) -> Any:
    return page.locator("#plan-items .item").filter(has_text=content)


def request_row(page: Page, content: str) -> Any:
    return page.locator("#requests .request").filter(has_text=content)


def test_a_done_clicked_on_the_page_is_honoured_once_the_agent_writes_it(
    agent: Agent, served: ServeProcess, page: Page, page_errors: PageErrors
) -> None:
    agent.write(todo("Write the tests", "in_progress"), todo("Ship it"), todo("Read", "completed"))
    page.goto(f"{served.url}/s/{agent.name}")
    expect(item(page, "Ship it").locator(".ask")).to_have_text(["done", "remove"])
    expect(item(page, "Read").locator(".ask")).to_have_text(["reopen", "remove"])
    expect(page.locator("#requests")).to_have_text("No requests yet.")

    item(page, "Ship it").locator(".ask-done").click()
    row = request_row(page, "Ship it")
    expect(row.locator(".status")).to_have_text("waiting")
    expect(row.locator(".kind")).to_have_text("done")
    expect(row.locator(".by")).to_have_text("by web view")
    expect(row.locator(".withdraw")).to_have_count(1)

    assert agent.take() == ["Ship it"]
    expect(row.locator(".status")).to_have_text("pending", timeout=POLL_MS)
    agent.write(todo("Write the tests", "in_progress"), todo("Ship it", "completed"))
    expect(row.locator(".status")).to_have_text("honoured", timeout=SETTLE_MS)
    expect(row.locator(".withdraw")).to_have_count(0)
    expect(item(page, "Ship it").locator(".ask")).to_have_text(["reopen", "remove"])
    assert page_errors == []


def test_an_added_item_a_note_and_a_withdrawal_from_the_page(
    agent: Agent, served: ServeProcess, page: Page, page_errors: PageErrors
) -> None:
    agent.write(todo("Write the tests", "in_progress"), todo("Ship it"))
    page.goto(f"{served.url}/s/{agent.name}")
    page.fill("#ask-add-text", "Update the changelog")
    page.click("#ask-add button")
    expect(request_row(page, "Update the changelog").locator(".status")).to_have_text("waiting")
    expect(page.locator("#ask-add-text")).to_have_value("")
    page.fill("#ask-note-text", "Use the staging database")
    page.press("#ask-note-text", "Enter")
    expect(request_row(page, "staging").locator(".kind")).to_have_text("note")
    item(page, "Ship it").locator(".ask-remove").click()
    expect(page.locator("#requests .request")).to_have_count(3)
    request_row(page, "Ship it").locator(".withdraw").click()
    expect(page.locator("#requests .request")).to_have_count(2)  # it never reaches the agent

    assert agent.take() == ["Update the changelog", "Use the staging database"]
    expect(request_row(page, "staging").locator(".status")).to_have_text(
        "delivered", timeout=POLL_MS
    )
    # withdrawn before the agent took it: passed over, never logged, gone from the list
    expect(page.locator("#requests .request").filter(has_text="Ship it")).to_have_count(0)
    agent.write(
        todo("Write the tests", "in_progress"), todo("Ship it"), todo("Update the changelog")
    )
    expect(request_row(page, "changelog").locator(".status")).to_have_text(
        "honoured", timeout=SETTLE_MS
    )
    assert page_errors == []


def test_a_refused_request_shows_the_servers_reason_as_text(
    agent: Agent, served: ServeProcess, page: Page, page_errors: PageErrors
) -> None:
    agent.write(todo("Ship it"))
    page.goto(f"{served.url}/s/{agent.name}")
    page.fill("#ask-add-text", "ship  IT")
    page.click("#ask-add button")

    expect(page.locator("#ask-problem")).to_have_text(
        "the plan already has 'ship  IT': there is nothing to add"
    )
    expect(page.locator("#ask-add-text")).to_have_value("ship  IT")  # kept, to be corrected
    expect(page.locator("#requests")).to_have_text("No requests yet.")
    assert [error for error in page_errors if "400 (Bad Request)" not in error] == []


def test_hostile_items_notes_and_names_are_shown_as_literal_text(
    agent: Agent, served: ServeProcess, page: Page, page_errors: PageErrors
) -> None:
    dialogs: list[Dialog] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog), dialog.dismiss()))
    agent.write(todo(HOSTILE), todo("</span><b>bold</b>"))
    # Playwright's sync API runs an event loop in this thread: the filer runs beside it
    with ThreadPoolExecutor(1) as other:
        filer = PlanRequests(agent.source, agent.name)
        other.submit(filer.file, "note", "<b>x</b>\x1b[2J", by=HOSTILE).result()
    page.goto(f"{served.url}/s/{agent.name}")

    item(page, "onerror").locator(".ask-done").click()
    expect(page.locator("#requests [data-kind=done] .content")).to_have_text(HOSTILE_SHOWN)
    page.fill("#ask-note-text", HOSTILE)
    page.click("#ask-note button")
    expect(page.locator("#requests [data-kind=note] .content")).to_have_text(
        ["<b>x</b>\\u001b[2J", HOSTILE_SHOWN]  # waiting, oldest first
    )
    expect(page.locator("#requests [data-kind=note] .by")).to_have_text(
        [f"by {HOSTILE_SHOWN}", "by web view"]
    )
    expect(item(page, "onerror").locator(".ask-done")).to_have_attribute(
        "aria-label", f"ask to mark “{HOSTILE_SHOWN}” done"
    )
    assert page.locator("main img, main b").count() == 0
    assert dialogs == []
    # the item the page asked about is the plan's own text, controls and all
    assert agent.take()[1] == HOSTILE
    assert page_errors == []


def test_without_requests_the_page_has_no_request_controls_nor_an_empty_list(
    tmp_path: Path, serve_process: Starter, page: Page, page_errors: PageErrors
) -> None:
    with JsonlSession(tmp_path / "live.jsonl") as session:
        session.append(*TURN)
        session.append("todo/write", {"todos": [todo("Ship it")]})
    child = serve_process(tmp_path)
    with (
        page.expect_response(lambda answer: answer.url.endswith("/live/requests")) as listed,
        page.expect_response(lambda answer: answer.url.endswith("/api/requests/token")) as token,
    ):
        page.goto(f"{child.url}/s/live")
    assert token.value.json()["token"] is None
    assert listed.value.json() == {"taken": [], "waiting": [], "asked": []}
    expect(page.locator("#plan-figures")).to_have_text("0/1 completed")
    expect(page.locator("#calls .call")).to_have_count(1)
    expect(page.locator("#connection")).to_have_text("live")

    expect(page.locator(".request-panel")).to_have_count(1)
    expect(page.locator(".request-panel")).to_be_hidden()  # nothing was asked
    assert page.locator(".asks, .ask-form, .withdraw").count() == 0
    assert page_errors == []  # the token route answers "no token", not a 404


def test_a_plain_server_lists_what_was_asked_read_only_as_it_stands(
    agent: Agent, serve_process: Starter, page: Page, page_errors: PageErrors
) -> None:
    child = serve_process(agent.source)
    try:
        agent.write(todo("Write the tests", "in_progress"), todo("Ship it"))
        with page.expect_response(lambda answer: answer.url.endswith("/requests")) as listed:
            page.goto(f"{child.url}/s/{agent.name}")
        assert listed.value.json()["asked"] == []
        expect(page.locator(".request-panel")).to_have_count(1)
        expect(page.locator(".request-panel")).to_be_hidden()
        filer = PlanRequests(agent.source, agent.name)
        with ThreadPoolExecutor(1) as other:  # beside the event loop of Playwright's sync API
            other.submit(filer.file, "done", "Ship it", by="grace").result()
            # taking it logs an event and writes no plan: the page, polling nothing (nothing
            # was open), hears of it from its stream
            assert agent.take() == ["Ship it"]
            row = request_row(page, "Ship it")
            expect(row.locator(".status")).to_have_text("pending", timeout=POLL_MS)
            expect(row.locator(".by")).to_have_text("by grace")
            other.submit(filer.file, "note", "Use the staging database", by="grace").result()
        # still waiting first, then what the turn asked (as `dsh-todo show` lists them)
        expect(page.locator("#requests .request .status")).to_have_text(
            ["waiting", "pending"], timeout=POLL_MS
        )
        agent.write(todo("Write the tests", "in_progress"), todo("Ship it", "completed"))
        expect(row.locator(".status")).to_have_text("honoured", timeout=SETTLE_MS)
        assert page.locator(".asks, .ask-form, .withdraw, #ask-problem:visible").count() == 0
        assert page_errors == []
    finally:
        child.process.kill()  # before a database is dropped under it
        child.process.wait(timeout=10)
