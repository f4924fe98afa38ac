"""The live plan view in a real browser: redraws, hostile content, resumed streams, the list."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, Route, expect
from psycopg.conninfo import conninfo_to_dict

from dsh_tool_todo.stores import postgres
from dsh_tool_todo.stores.jsonl import JsonlSession

from ...stores.conftest import fresh_database
from ..conftest import NOTE, TURN, ServeProcess, free_port, todo, write_log
from .conftest import PageErrors, Proxy

Starter = Callable[..., ServeProcess]
REDRAW_MS = 2000  # the longest a page may take to show an append


@pytest.fixture
def writer(tmp_path: Path) -> Iterator[JsonlSession]:
    """The live session's one writer, appending while the page watches."""
    with JsonlSession(tmp_path / "live.jsonl") as session:
        yield session


def write(session: JsonlSession, *todos: dict[str, str]) -> None:
    session.append("todo/write", {"todos": list(todos)})


def test_a_live_page_redraws_within_two_seconds_of_each_append(
    tmp_path: Path,
    writer: JsonlSession,
    serve_process: Starter,
    page: Page,
    page_errors: PageErrors,
) -> None:
    writer.append(*TURN)
    child = serve_process(tmp_path)
    page.goto(f"{child.url}/s/live")
    expect(page.locator("#connection")).to_have_text("live")
    expect(page.locator("#plan-empty")).to_contain_text("cleared")

    write(writer, todo("Read", "completed"), todo("Build", "in_progress"), todo("Test"))
    expect(page.locator("#plan-figures")).to_have_text("1/3 completed", timeout=REDRAW_MS)
    expect(page.locator("#plan-now .content")).to_have_text(["Build"])
    expect(page.locator("#plan-items .glyph")).to_have_text(["☑", "►", "☐"])
    expect(page.locator("#calls .call")).to_have_count(1)

    # a parallel plan: every active item is shown in full
    write(
        writer, todo("Read", "completed"), todo("Build", "in_progress"), todo("Test", "in_progress")
    )
    expect(page.locator("#plan-now .content")).to_have_text(["Build", "Test"], timeout=REDRAW_MS)
    newest = page.locator("#calls .call").first
    expect(newest).to_have_attribute("data-seq", "2")
    expect(newest.locator(".change.status")).to_have_text("►Testpending → in progress")
    expect(newest.locator(".counts")).to_have_text("0 pending · 2 in progress · 1 completed")

    write(writer, todo("Read", "completed"), todo("Ship"))
    expect(page.locator("#calls .call").first.locator(".change.removed .content")).to_have_text(
        ["Build", "Test"], timeout=REDRAW_MS
    )
    expect(page.locator("#calls .call").first.locator(".change.added .content")).to_have_text(
        ["Ship"]
    )

    writer.append(*TURN)
    expect(page.locator("#plan-empty")).to_contain_text("cleared", timeout=REDRAW_MS)
    expect(page.locator("#plan-items li")).to_have_count(0)
    expect(page.locator("#calls .call")).to_have_count(0)
    expect(page.locator("#plan-figures")).to_have_text("")
    assert page_errors == []


def test_the_tool_row_on_opening_shows_only_the_current_turn(
    tmp_path: Path, serve_process: Starter, page: Page, page_errors: PageErrors
) -> None:
    write_log(
        tmp_path / "s.jsonl",
        [
            ("todo/write", {"todos": [todo("Old turn")]}),
            TURN,
            ("todo/write", {"todos": [todo("A", "in_progress")]}),
            NOTE,
            ("todo/write", {"todos": [todo("A", "completed"), todo("B")]}),
            ("todo/write", {"todos": []}),
        ],
    )
    child = serve_process(tmp_path)

    page.goto(f"{child.url}/s/s")

    expect(page.locator("#calls .call")).to_have_count(3)
    expect(page.locator("#calls .seq")).to_have_text(["#5", "#4", "#2"])
    expect(page.locator("#plan-empty")).to_have_text(
        "The plan is empty (the last call wrote no todos)."
    )
    expect(page.locator(".tool-row .help")).to_contain_text("A refused call appends nothing")
    assert page_errors == []


HOSTILE = [
    "<script>window.__pwned = 1</script>",
    '<img src=x onerror="window.__pwned = 2">',
    "</span><b>bold</b><a href=javascript:alert(1)>link</a>",
    "left \u202e reversed \u2066 isolate",
    "bell \x07 escape \x1b[31m",
]


def test_hostile_content_appears_as_literal_text_and_nothing_runs(
    tmp_path: Path,
    writer: JsonlSession,
    serve_process: Starter,
    page: Page,
    page_errors: PageErrors,
) -> None:
    long_line = "x" * 10_240
    write(writer, *[todo(text) for text in HOSTILE[:3]])
    child = serve_process(tmp_path)
    page.goto(f"{child.url}/s/live")
    expect(page.locator("#plan-items .content")).to_have_count(3)

    write(writer, *[todo(text) for text in HOSTILE], todo(long_line, "in_progress"))
    shown = [
        "<script>window.__pwned = 1</script>",
        '<img src=x onerror="window.__pwned = 2">',
        "</span><b>bold</b><a href=javascript:alert(1)>link</a>",
        "left \\u202e reversed \\u2066 isolate",
        "bell \\u0007 escape \\u001b[31m",
        long_line,
    ]
    expect(page.locator("#plan-items .content")).to_have_text(shown, timeout=REDRAW_MS)
    expect(page.locator("#plan-now .content")).to_have_text([long_line])

    assert page.evaluate("window.__pwned") is None
    assert page.locator("main img, main b, main a[href^='javascript']").count() == 0
    assert page.evaluate("document.documentElement.scrollWidth") <= 900
    assert page_errors == []


def test_a_killed_and_restarted_server_is_followed_by_a_resumed_stream(
    tmp_path: Path,
    writer: JsonlSession,
    serve_process: Starter,
    page: Page,
    page_errors: PageErrors,
) -> None:
    write(writer, todo("A", "in_progress"))
    port = free_port()
    child = serve_process(tmp_path, port=port)
    page.goto(f"{child.url}/s/live")
    expect(page.locator("main")).to_have_attribute("data-frames", "0")

    child.process.kill()
    child.process.wait(timeout=10)
    write(writer, todo("A", "completed"), todo("B", "in_progress"))  # seq 1
    writer.append(*NOTE)  # seq 2: no frame
    write(writer, todo("A", "completed"), todo("B", "completed"))  # seq 3
    serve_process(tmp_path, port=port)

    expect(page.locator("main")).to_have_attribute("data-frames", "0 1 3", timeout=15_000)
    expect(page.locator("#calls .seq")).to_have_text(["#3", "#1", "#0"])
    expect(page.locator("#plan-figures")).to_have_text("2/2 completed")
    assert [error for error in page_errors if "net::ERR_" not in error] == []  # but the cut


def test_a_dropped_connection_is_followed_by_a_resumed_stream(
    tmp_path: Path,
    writer: JsonlSession,
    serve_process: Starter,
    proxy: type[Proxy],
    page: Page,
    page_errors: PageErrors,
) -> None:
    write(writer, todo("A", "in_progress"))
    port = free_port()
    relay = proxy(port)
    serve_process(tmp_path, "--allow-host", f"127.0.0.1:{relay.port}", port=port)
    page.goto(f"http://127.0.0.1:{relay.port}/s/live")
    expect(page.locator("main")).to_have_attribute("data-frames", "0")

    assert relay.drop() >= 1
    write(writer, todo("A", "completed"), todo("B", "in_progress"))  # seq 1
    write(writer, todo("A", "completed"), todo("B", "completed"))  # seq 2

    expect(page.locator("main")).to_have_attribute("data-frames", "0 1 2", timeout=10_000)
    expect(page.locator("#calls .seq")).to_have_text(["#2", "#1", "#0"])
    assert [error for error in page_errors if "net::ERR_" not in error] == []  # but the cut


def test_an_answer_cut_short_is_asked_again_not_read_as_empty(
    tmp_path: Path,
    writer: JsonlSession,
    serve_process: Starter,
    page: Page,
    page_errors: PageErrors,
) -> None:
    # a connection dropped mid-body leaves a 200 whose JSON does not parse; read as `{}` it
    # threw in the page ("Cannot read properties of undefined")
    write(writer, todo("A", "completed"), todo("B", "in_progress"))
    child = serve_process(tmp_path)
    cut: list[str] = []

    def cut_the_first(route: Route) -> None:
        if any(route.request.url.split("?")[0] == seen.split("?")[0] for seen in cut):
            route.continue_()
            return
        cut.append(route.request.url)
        route.fulfill(status=200, content_type="application/json", body='{"events": [{"se')

    page.route("**/api/sessions/live/family", cut_the_first)
    page.route("**/api/sessions/live/events?*", cut_the_first)
    page.goto(f"{child.url}/s/live")
    expect(page.locator("#calls .seq")).to_have_text(["#0"], timeout=5_000)
    expect(page.locator("#plan-figures")).to_have_text("1/2 completed")
    assert len(cut) == 2, cut
    assert page_errors == []


def test_the_session_list_shows_a_new_log_when_it_appears(
    tmp_path: Path, serve_process: Starter, page: Page, page_errors: PageErrors
) -> None:
    write_log(tmp_path / "first.jsonl", [("todo/write", {"todos": [todo("A", "completed")]})])
    child = serve_process(tmp_path)
    page.goto(f"{child.url}/")
    expect(page.locator(".session .name")).to_have_text(["first"])

    write_log(
        tmp_path / "second%40example.jsonl",
        [("todo/write", {"todos": [todo("A", "completed"), todo("B", "in_progress")]})],
    )

    expect(page.locator(".session .name")).to_have_text(["second@example", "first"])
    expect(page.locator(".session").first.locator(".figures")).to_have_text("1/2 · 1 active")
    page.locator(".session .name").first.click()
    expect(page.locator("#plan-figures")).to_have_text("1/2 completed")
    assert page.url.endswith("/s/second%2540example")
    assert page_errors == []


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_readable_in_both_schemes_at_400_px(
    tmp_path: Path, browser: Browser, serve_process: Starter, scheme: str
) -> None:
    write_log(
        tmp_path / "agent.jsonl",
        [
            TURN,
            ("todo/write", {"todos": [todo("Read the report command"), todo("Add a flag")]}),
            (
                "todo/write",
                {
                    "todos": [
                        todo("Read the report command", "completed"),
                        todo("Add the --json flag to the report command", "in_progress"),
                        todo("Write tests for the JSON output"),
                    ]
                },
            ),
        ],
    )
    child = serve_process(tmp_path)
    context = browser.new_context(viewport={"width": 400, "height": 900}, color_scheme=scheme)
    page = context.new_page()
    page.goto(f"{child.url}/s/agent")
    expect(page.locator("#calls .call")).to_have_count(2)

    colours = page.evaluate(
        "[getComputedStyle(document.body).backgroundColor, getComputedStyle(document.body).color]"
    )
    width = page.evaluate("document.documentElement.scrollWidth")
    shots = Path(os.environ.get("DSH_TODO_SCREENSHOTS", str(tmp_path)))
    page.screenshot(path=str(shots / f"web-{scheme}-400.png"), full_page=True)
    context.close()

    dark_background = colours[0] == "rgb(21, 23, 27)"
    assert dark_background is (scheme == "dark")
    assert colours[1] == ("rgb(232, 233, 236)" if scheme == "dark" else "rgb(29, 29, 31)")
    assert width <= 400


def test_the_tool_row_keeps_the_last_fifty_calls_each_diffed_against_its_predecessor(
    tmp_path: Path, writer: JsonlSession, serve_process: Starter, page: Page
) -> None:
    writer.append(*TURN)
    for step in range(60):  # seqs 1..60, each adding one todo
        write(writer, *[todo(f"step {n}", "completed") for n in range(step)], todo(f"step {step}"))
    child = serve_process(tmp_path)
    page.goto(f"{child.url}/s/live")

    expect(page.locator("#calls .call")).to_have_count(50)
    expect(page.locator("#calls .seq").first).to_have_text("#60")
    expect(page.locator("#calls .seq").last).to_have_text("#11")
    oldest = page.locator("#calls .call").last
    expect(oldest.locator(".change.added .content")).to_have_text(["step 10"])
    expect(oldest.locator(".change.status .content")).to_have_text(["step 9"])

    write(writer, todo("fresh start", "in_progress"))
    expect(page.locator("#calls .seq").first).to_have_text("#61", timeout=REDRAW_MS)
    expect(page.locator("#calls .call")).to_have_count(50)
    expect(page.locator("#calls .seq").last).to_have_text("#12")


def test_a_malformed_session_address_is_an_unknown_session_not_a_script_error(
    tmp_path: Path, serve_process: Starter, page: Page, page_errors: PageErrors
) -> None:
    child = serve_process(tmp_path)

    page.goto(f"{child.url}/s/bad%E0%A4")

    expect(page.locator("#problem .reason")).to_contain_text("There is no session named")
    assert [error for error in page_errors if error.startswith("pageerror")] == []


def test_a_page_on_a_postgresql_session_redraws_when_another_process_appends(
    serve_process: Starter, page: Page, page_errors: PageErrors
) -> None:
    with fresh_database() as conninfo:
        postgres.setup(conninfo)
        params = conninfo_to_dict(conninfo)
        url = f"postgresql://{params['user']}@{params['host']}:{params['port']}/{params['dbname']}"
        with postgres.PostgresSession(conninfo, "agent-7") as session:
            session.append("todo/write", {"todos": [todo("A", "in_progress"), todo("B")]})
            child = serve_process(url)
            page.goto(f"{child.url}/s/agent-7")
            expect(page.locator("#plan-figures")).to_have_text("0/2 completed")

            session.append(
                "todo/write", {"todos": [todo("A", "completed"), todo("B", "in_progress")]}
            )
            expect(page.locator("#plan-figures")).to_have_text("1/2 completed", timeout=REDRAW_MS)
            expect(page.locator("#plan-now .content")).to_have_text(["B"])

            session.append(*TURN)
            expect(page.locator("#plan-empty")).to_contain_text("cleared", timeout=REDRAW_MS)
        child.process.kill()  # before the database is dropped
        child.process.wait(timeout=10)
    assert page_errors == []


def test_the_tool_row_finds_calls_behind_more_than_a_page_scan_of_other_events(
    tmp_path: Path, serve_process: Starter, page: Page, page_errors: PageErrors
) -> None:
    """A filtered page reads a bounded stretch (A12): the page asks on from its cursor."""
    filler = ("message/assistant", {"text": "x" * 200})
    first = ("todo/write", {"todos": [todo("A")]})
    last = ("todo/write", {"todos": [todo("A", "completed"), todo("B")]})
    write_log(tmp_path / "s.jsonl", [TURN, first, *([filler] * 9000), last])
    assert (tmp_path / "s.jsonl").stat().st_size > 2 << 20  # two bounded scans at least
    child = serve_process(tmp_path)

    page.goto(f"{child.url}/s/s")

    expect(page.locator("#calls .seq")).to_have_text(["#9002", "#1"])
    expect(page.locator("#plan-figures")).to_have_text("1/2 completed")
    assert page_errors == []
