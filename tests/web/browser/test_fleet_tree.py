"""The session list as a tree of sub-agents, in a real browser: live, inert, filtered."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from playwright.sync_api import Page, expect

from dsh_tool_todo.core.contract import SESSION_END_EVENT_TYPE
from dsh_tool_todo.core.links import end_data
from dsh_tool_todo.stores.jsonl import JsonlSession

from ..conftest import TURN, ServeProcess, plan_write, todo
from .conftest import PageErrors

Starter = Callable[..., ServeProcess]
REDRAW_MS = 2000


def linked(path: Path, parent: str | None, *events: tuple[str, dict[str, Any]]) -> None:
    with JsonlSession(path, parent=parent) as session:
        for kind, data in events:
            session.append(kind, data)


def node(name: str) -> str:
    return f'li.session[data-name="{name}"]'


def fleet(directory: Path) -> None:
    """lead → researcher → checker → deep (four levels), and a healthy sibling of researcher."""
    linked(directory / "lead.jsonl", None, TURN, plan_write(todo("plan", "in_progress")))
    linked(directory / "researcher.jsonl", "lead", TURN, plan_write(todo("read", "in_progress")))
    linked(directory / "writer.jsonl", "lead", TURN, plan_write(todo("draft", "completed")))
    linked(
        directory / "checker.jsonl",
        "researcher",
        TURN,
        plan_write(todo("check A"), todo("check B")),
        plan_write(todo("check A", "in_progress")),  # B dropped unfinished: a signal
    )
    linked(directory / "deep.jsonl", "checker", TURN, plan_write(todo("leaf")))


def test_the_list_is_a_tree_and_a_childs_write_redraws_it(
    tmp_path: Path, serve_process: Starter, page: Page, page_errors: PageErrors
) -> None:
    fleet(tmp_path)
    child = serve_process(tmp_path)
    page.goto(f"{child.url}/")

    chain = " > ul.children > ".join(
        node(name) for name in ("lead", "researcher", "checker", "deep")
    )
    expect(page.locator(f"#session-list > {chain}")).to_have_attribute("data-depth", "3")
    expect(page.locator(f"#session-list > {node('lead')} > ul.children > li")).to_have_count(2)
    expect(page.locator("#session-list > li")).to_have_count(1)
    checker = page.locator(f"{node('checker')} > .signals")
    expect(checker).to_contain_text("dropped items")
    expect(page.locator(f"{node('researcher')} > .now")).to_have_text("now: read")

    with JsonlSession(tmp_path / "checker.jsonl") as session:
        session.append(*plan_write(todo("check A", "completed"), todo("check C", "in_progress")))
    figures = page.locator(f"{node('researcher')} > ul.children > {node('checker')} > .progress")
    expect(figures).to_have_text("1/2 · 1 active", timeout=REDRAW_MS)
    expect(page.locator(f"{node('checker')} > .now")).to_have_text("now: check C")
    assert page_errors == []


def test_hostile_names_and_a_missing_parent_are_inert_text(
    tmp_path: Path, serve_process: Starter, page: Page, page_errors: PageErrors
) -> None:
    evil = '<img src=x onerror="window.__pwned=1">'
    gone = "<script>window.__pwned=2</script>\x1b[31m"
    linked(tmp_path / f"{evil}.jsonl", None, plan_write(todo("</li><b>x</b>", "in_progress")))
    linked(tmp_path / "kid.jsonl", evil, plan_write(todo("bell \x07", "in_progress")))
    linked(tmp_path / "orphan.jsonl", gone, plan_write(todo("x")))
    linked(tmp_path / "a.jsonl", "b", plan_write(todo("x")))
    linked(tmp_path / "b.jsonl", "a", plan_write(todo("y")))
    child = serve_process(tmp_path)
    page.goto(f"{child.url}/")

    expect(page.locator(f"#session-list > li > ul.children > {node('kid')}")).to_have_count(1)
    expect(page.locator(f"{node('kid')} > .now")).to_have_text("now: bell \\u0007")
    holder = page.locator("#session-list > li.session.unseen")
    expect(holder.locator("> .name")).to_have_text("<script>window.__pwned=2</script>\\u001b[31m")
    expect(holder.locator("> .when")).to_have_text("parent not visible here")
    expect(holder.locator(f"> ul.children > {node('orphan')}")).to_have_count(1)
    # a <-> b: each a root marked as a cycle, the page does not loop
    expect(page.locator(f"#session-list > {node('a')}.cycle")).to_have_count(1)
    expect(page.locator(f"#session-list > {node('b')}.cycle > .cycle-note")).to_have_text(
        "its link to a makes a cycle"
    )

    assert page.evaluate("window.__pwned") is None
    assert page.locator("main img, main b, main script").count() == 0
    page.locator(f"{node('kid')} > a.name").click()
    expect(page.locator("#family-parent")).to_have_text(evil)
    page.locator("#family-parent").click()
    expect(page.locator("#family-children a")).to_have_text(["kid"])
    expect(page.locator("#plan-now .content")).to_have_text(["</li><b>x</b>"])
    assert page.evaluate("window.__pwned") is None
    assert page_errors == []


def test_the_health_filter_keeps_flagged_sessions_and_those_above_them(
    tmp_path: Path, serve_process: Starter, page: Page, page_errors: PageErrors
) -> None:
    fleet(tmp_path)
    child = serve_process(tmp_path)
    page.goto(f"{child.url}/")
    expect(page.locator("li.session")).to_have_count(5)

    page.locator("#only-signals").check()
    expect(page.locator("li.session")).to_have_count(3)
    names = page.locator("li.session").evaluate_all("nodes => nodes.map(n => n.dataset.name)")
    assert names == ["lead", "researcher", "checker"]
    # a write that clears the signal (a new turn) empties the filtered list, live
    with JsonlSession(tmp_path / "checker.jsonl") as session:
        session.append(*TURN)
    expect(page.locator("#session-list .empty")).to_have_text(
        "No shown session has a health signal.", timeout=REDRAW_MS
    )
    page.locator("#only-signals").uncheck()
    expect(page.locator("li.session")).to_have_count(5)
    assert page_errors == []


def test_the_session_page_links_its_parent_and_its_children(
    tmp_path: Path, serve_process: Starter, page: Page, page_errors: PageErrors
) -> None:
    fleet(tmp_path)
    linked(tmp_path / "stray.jsonl", "elsewhere", plan_write(todo("x")))
    child = serve_process(tmp_path)
    page.goto(f"{child.url}/s/researcher")
    expect(page.locator("#family-parent")).to_have_text("lead")
    expect(page.locator("#family-children a")).to_have_text(["checker"])
    page.locator("#family-children a").click()
    expect(page.locator("#family-children a")).to_have_text(["deep"])
    assert page.url.endswith("/s/checker")

    page.goto(f"{child.url}/s/stray")
    expect(page.locator("#family-parent")).to_have_text("elsewhere (not visible here)")
    assert page.locator("#family-parent").evaluate("n => n.tagName") == "SPAN"
    page.goto(f"{child.url}/s/deep")
    expect(page.locator("#family-children")).to_have_count(0)
    assert page_errors == []


def test_a_stuck_run_older_than_the_writes_read_is_titled_at_least(
    tmp_path: Path, serve_process: Starter, page: Page, page_errors: PageErrors
) -> None:
    with JsonlSession(tmp_path / "long.jsonl") as session:
        session.append(*TURN)
        for n in range(1010):  # seqs 1 to 1010: the server reads the latest 1000 writes
            session.append(*plan_write(todo("A", "in_progress"), todo(f"n{n}", "completed")))
    child = serve_process(tmp_path)
    page.goto(f"{child.url}/")
    signals = page.locator(f"{node('long')} > .signals")
    expect(signals).to_have_attribute(
        "title", 'stuck at seq 15 (in progress for at least 5 writes): "A"'
    )
    assert page_errors == []


def test_an_ended_sub_agent_is_shown_ended_with_its_outcome_live(
    tmp_path: Path, serve_process: Starter, page: Page, page_errors: PageErrors
) -> None:
    failed = end_data("failed", "<b>backend</b> down\x1b[31m")
    fleet(tmp_path)
    with JsonlSession(tmp_path / "checker.jsonl") as session:
        session.append(SESSION_END_EVENT_TYPE, failed)
    child = serve_process(tmp_path)
    page.goto(f"{child.url}/")

    ended = page.locator(f"{node('checker')}.ended.failed > .end")
    expect(ended).to_have_text("ended: failed: <b>backend</b> down\\u001b[31m")
    expect(page.locator(f"{node('researcher')} > .end")).to_have_count(0)
    with JsonlSession(tmp_path / "researcher.jsonl") as session:
        session.append(SESSION_END_EVENT_TYPE, end_data("finished"))
    expect(page.locator(f"{node('researcher')}.ended > .end")).to_have_text(
        "ended: finished", timeout=REDRAW_MS
    )
    expect(page.locator(f"{node('researcher')}.failed")).to_have_count(0)
    assert page.locator("main b").count() == 0
    assert page_errors == []
