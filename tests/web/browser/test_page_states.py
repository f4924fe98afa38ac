"""The page's states beside a live plan: loading, a broken log, no such session, long items."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

from playwright.sync_api import Page, Route, expect

from dsh_tool_todo.stores.jsonl import JsonlSession

from ..conftest import TURN, ServeProcess, todo, write_log
from .conftest import PageErrors

Starter = Callable[..., ServeProcess]
BROKEN_LINE = b'{"seq": 9, "type": "todo/write", "data": {"todos": "not a list"}}\n'


def stream_requests(page: Page) -> list[str]:
    seen: list[str] = []
    page.on(
        "request", lambda request: seen.append(request.url) if "/stream" in request.url else None
    )
    return seen


def test_a_broken_log_shows_the_servers_reason_and_is_not_retried(
    tmp_path: Path, serve_process: Starter, page: Page
) -> None:
    write_log(tmp_path / "broken.jsonl", [("todo/write", {"todos": [todo("A")]})])
    with open(tmp_path / "broken.jsonl", "ab") as log:
        log.write(BROKEN_LINE)
    child = serve_process(tmp_path)
    reason = json.loads(page.request.get(f"{child.url}/api/sessions/broken/projection").text())[
        "error"
    ]
    streams = stream_requests(page)

    page.goto(f"{child.url}/s/broken")

    expect(page.locator("#problem")).to_contain_text("This session's log cannot be read")
    expect(page.locator("#problem .reason")).to_have_text(reason)
    expect(page.locator("#connection")).to_have_text("stopped: reload the page to try again")
    time.sleep(3)  # long enough for three retries, were there any
    assert len(streams) == 1
    expect(page.locator("#plan-empty")).to_have_count(0)
    expect(page.locator("#connection")).not_to_contain_text("retrying")


def test_a_log_that_breaks_while_watched_shows_the_fatal_frames_reason(
    tmp_path: Path, serve_process: Starter, page: Page, page_errors: PageErrors
) -> None:
    write_log(tmp_path / "live.jsonl", [("todo/write", {"todos": [todo("A")]})])
    child = serve_process(tmp_path)
    streams = stream_requests(page)
    page.goto(f"{child.url}/s/live")
    expect(page.locator("#plan-figures")).to_have_text("0/1 completed")

    with open(tmp_path / "live.jsonl", "ab") as log:
        log.write(b"this is not an event\n")

    expect(page.locator("#problem .reason")).to_contain_text("not a session event")
    expect(page.locator("#connection")).to_have_text("stopped: reload the page to try again")
    time.sleep(2.5)
    assert len(streams) == 1
    # A history read in flight when the line was appended may get the same 422: Chromium logs
    # every 4xx answer as a console error; anything else the page logged is a defect.
    refused = "the server responded with a status of 422"
    assert [error for error in page_errors if refused not in error] == []


def test_an_unknown_session_is_a_clear_state_without_the_plan_or_the_tool_row(
    tmp_path: Path, serve_process: Starter, page: Page, page_errors: PageErrors
) -> None:
    child = serve_process(tmp_path)

    page.goto(f"{child.url}/s/nobody")

    expect(page.locator("#problem h2")).to_have_text("No such session")
    expect(page.locator("#problem .reason")).to_have_text(
        "There is no session named “nobody” here."
    )
    expect(page.locator("#problem a")).to_have_attribute("href", "/")
    expect(page.locator("#plan-progress")).to_have_count(0)
    expect(page.locator("#calls")).to_have_count(0)
    expect(page.locator("#connection")).to_have_text("no session 'nobody' is served")
    assert [error for error in page_errors if "404 (Not Found)" not in error] == []


def test_the_page_says_loading_until_the_first_snapshot(
    tmp_path: Path, serve_process: Starter, page: Page
) -> None:
    write_log(tmp_path / "s.jsonl", [TURN, ("todo/write", {"todos": [todo("A")]})])
    child = serve_process(tmp_path)
    held: list[Route] = []
    page.route("**/api/sessions/s/stream*", lambda route: held.append(route))

    page.goto(f"{child.url}/s/s")

    expect(page.locator("#plan-empty")).to_have_text("Loading…")
    expect(page.locator("#calls")).to_have_text("Loading…")
    expect(page.locator("main")).not_to_contain_text("No plan has been recorded")
    expect(page.locator("main")).not_to_contain_text("No todo_write call")
    assert len(held) == 1
    held[0].continue_()
    expect(page.locator("#plan-figures")).to_have_text("0/1 completed")
    expect(page.locator("#calls .call")).to_have_count(1)


FIRST_CONTENT = "document.querySelector('#plan-items .content')"


def test_a_clipped_item_expands_by_click_and_by_keyboard_and_stays_open(
    tmp_path: Path, serve_process: Starter, page: Page, page_errors: PageErrors
) -> None:
    long_item = " ".join(f"word{n}" for n in range(400))
    with JsonlSession(tmp_path / "live.jsonl") as writer:
        writer.append("todo/write", {"todos": [todo(long_item), todo("short")]})
        child = serve_process(tmp_path)
        page.goto(f"{child.url}/s/live")
        long_content = page.locator("#plan-items .content").first
        short_content = page.locator("#plan-items .content").last
        expect(long_content).to_have_attribute("aria-expanded", "false")
        expect(short_content).not_to_have_attribute("aria-expanded", "false")
        # waited for, not read once: on a loaded machine the page may be between two layouts
        page.wait_for_function(
            f"() => {FIRST_CONTENT}.scrollHeight > {FIRST_CONTENT}.clientHeight + 1"
        )
        assert long_content.get_attribute("title") == long_item

        long_content.click()
        expect(long_content).to_have_attribute("aria-expanded", "true")
        page.wait_for_function(
            f"() => {FIRST_CONTENT}.scrollHeight <= {FIRST_CONTENT}.clientHeight + 1"
        )

        writer.append("todo/write", {"todos": [todo(long_item), todo("short", "completed")]})
        expect(page.locator("#plan-figures")).to_have_text("1/2 completed")
        expect(page.locator("#plan-items .content").first).to_have_attribute(
            "aria-expanded", "true"
        )

        page.locator("#plan-items .content").first.focus()
        page.keyboard.press("Enter")
        expect(page.locator("#plan-items .content").first).to_have_attribute(
            "aria-expanded", "false"
        )
        page.keyboard.press(" ")
        expect(page.locator("#plan-items .content").first).to_have_attribute(
            "aria-expanded", "true"
        )
    assert page_errors == []


def test_owner_keys_are_shown_decoded_and_addressed_encoded(
    tmp_path: Path, serve_process: Starter, page: Page, page_errors: PageErrors
) -> None:
    write_log(tmp_path / "%42ob%20%53mith.jsonl", [("todo/write", {"todos": [todo("A")]})])
    write_log(tmp_path / "odd%zz.jsonl", [("todo/write", {"todos": [todo("A")]})])
    child = serve_process(tmp_path)

    page.goto(f"{child.url}/")
    bob = page.locator(".session .name", has_text="Bob Smith")
    expect(bob).to_have_attribute("href", "/s/%2542ob%2520%2553mith")
    expect(page.locator(".session .name", has_text="odd%zz")).to_have_count(1)
    bob.click()

    expect(page.locator("#where")).to_have_text("Bob Smith")
    expect(page.locator("#plan-figures")).to_have_text("0/1 completed")
    assert page.url.endswith("/s/%2542ob%2520%2553mith")
    assert page.title() == "Bob Smith · dsh-todo"
    assert page_errors == []


def test_one_row_no_address_can_name_never_blanks_the_session_list(
    tmp_path: Path, serve_process: Starter, page: Page
) -> None:
    child = serve_process(tmp_path)
    rows = [
        {"name": "bad\udcff", "owner": None, "lastActivity": 1.0, "progress": None},
        {"name": "good", "owner": "good", "lastActivity": 2.0, "progress": None},
    ]
    body = json.dumps({"sessions": rows, "total": 2, "limit": 200})
    page.route(
        "**/api/sessions?*",
        lambda route: route.fulfill(status=200, content_type="application/json", body=body),
    )

    page.goto(f"{child.url}/")

    expect(page.locator(".session .name")).to_have_count(2)
    expect(page.locator(".session a.name")).to_have_text(["good"])
    expect(page.locator("#connection")).not_to_contain_text("cannot reach")


def test_the_token_cookie_works_beside_hostile_cookies_and_a_second_server(
    tmp_path: Path, serve_process: Starter, page: Page, page_errors: PageErrors
) -> None:
    write_log(tmp_path / "s.jsonl", [("todo/write", {"todos": [todo("A")]})])
    exposed = ("--host", "0.0.0.0", "--expose", "--allow-host", "127.0.0.1")
    servers = [serve_process(tmp_path, *exposed, wait_for="Token:") for _ in range(2)]
    tokens = [
        next(line for line in child.first_lines if line.startswith("Token: "))[7:]
        for child in servers
    ]
    for child, token in zip(servers, tokens, strict=True):
        page.goto(f"{child.url}/?token={token}")
        expect(page.locator(".session .name")).to_have_text(["s"])
    page.evaluate(
        """() => {
            document.cookie = "theme=dark mode; path=/";
            document.cookie = 'prefs={"a": 1, "b": [2]}; path=/';
            document.cookie = "flag; path=/";
        }"""
    )

    for child in servers:  # each still finds its own token, beside the other's and the rest
        page.goto(f"{child.url}/s/s")
        expect(page.locator("#plan-figures")).to_have_text("0/1 completed")
        expect(page.locator("#connection")).to_have_text("live")
    assert page.url.endswith("/s/s")
    assert page_errors == []
