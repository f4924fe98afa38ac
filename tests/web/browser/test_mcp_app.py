"""The plan's MCP App view in Chromium, hosted by the Apps SDK's own AppBridge on a real
`dsh-todo mcp` (tests/web/browser/mcp_app_host.py): it draws the plan, redraws on writes,
shows hostile text as text, and keeps to the host's content-security policy."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Frame, FrameLocator, Page, expect

from .conftest import PageErrors
from .mcp_app_host import AppHost, app_host, bundle_bridge

REDRAW_MS = 2000
START_MS = 15000  # a cold page, a bundle of the SDK and a server behind it, on a busy machine


def todo(content: str, status: str = "pending") -> dict[str, str]:
    return {"content": content, "status": status}


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return bundle_bridge(tmp_path_factory.mktemp("bridge") / "host.js")


@pytest.fixture
def host(tmp_path: Path, bundle: Path) -> Iterator[AppHost]:
    with app_host(tmp_path / "plans", tmp_path / "server.err", bundle) as started:
        yield started
    assert (tmp_path / "server.err").read_text(encoding="utf-8") == ""


def write(host: AppHost, *todos: dict[str, str]) -> None:
    """The agent's call, straight to the server: the view is not told of it."""
    answer = host.mcp.relay("tools/call", {"name": "todo_write", "arguments": {"todos": todos}})
    assert answer["isError"] is False, answer


def model_call(page: Page, *todos: dict[str, str], tell: bool) -> dict[str, Any]:
    """The agent's call made by the host page, which passes its result to the view if ``tell``."""
    answer: dict[str, Any] = page.evaluate(
        "([todos, tell]) => window.host.modelCall('todo_write', { todos }, tell)", [todos, tell]
    )
    assert answer["isError"] is False, answer
    return answer


def opened(page: Page, host: AppHost) -> FrameLocator:
    page.goto(host.url)
    view = page.frame_locator("iframe")
    expect(view.locator("#plan")).to_have_attribute("data-state", "shown", timeout=START_MS)
    return view


def view_frame(page: Page) -> Frame:
    (frame,) = page.main_frame.child_frames
    return frame


def items(view: FrameLocator) -> list[str]:
    return view.locator("#items .content").all_inner_texts()


def test_the_view_draws_the_plan_and_redraws_within_2_s_of_a_write(
    page: Page, page_errors: PageErrors, host: AppHost
) -> None:
    assert host.tool["_meta"] == {"ui": {"resourceUri": "ui://dsh-tool-todo/plan"}}
    write(
        host,
        todo("Read the issue", "completed"),
        todo("Write the view", "in_progress"),
        todo("Ship"),
    )
    view = opened(page, host)

    expect(view.locator("#items .content")).to_have_text(
        ["Read the issue", "Write the view", "Ship"]
    )
    expect(view.locator("#figures")).to_have_text("1/3 completed")
    expect(view.locator("#now")).to_have_text("Now: Write the view")
    assert view.locator("#bar").evaluate("bar => [bar.value, bar.max]") == [1, 3]
    assert view.locator(".item").evaluate_all("nodes => nodes.map(n => n.dataset.status)") == [
        "completed",
        "in_progress",
        "pending",
    ]

    model_call(
        page, todo("Read the issue", "completed"), todo("Write the view", "completed"), tell=False
    )
    expect(view.locator("#figures")).to_have_text("2/2 completed", timeout=REDRAW_MS)
    expect(view.locator("#now")).to_have_text("")
    expect(view.locator("#empty")).to_be_hidden()

    write(host)  # an empty plan: said so, not drawn as nothing
    expect(view.locator("#empty")).to_have_text(
        "No plan yet: the agent has not written one.", timeout=REDRAW_MS
    )
    assert items(view) == []
    state = page.evaluate(
        "({ initialized: host.initialized, reads: host.reads, sizes: host.sizes })"
    )
    assert state["initialized"] is True
    assert state["reads"] >= 3  # every plan the view drew came through the host
    assert state["sizes"], "the view told the host its size"
    assert page_errors == []


def test_a_tool_result_redraws_at_once_and_the_interval_finds_what_it_was_not_told(
    page: Page, page_errors: PageErrors, host: AppHost
) -> None:
    page.clock.install()
    view = opened(page, host)
    expect(view.locator("#empty")).to_have_text("No plan yet: the agent has not written one.")
    page.clock.pause_at(time.time() * 1000 + 60_000)  # from here no timer fires unless run

    model_call(page, todo("Told", "in_progress"), tell=True)
    expect(view.locator("#items .content")).to_have_text(["Told"], timeout=REDRAW_MS)

    model_call(page, todo("Untold", "in_progress"), tell=False)
    reads = page.evaluate("window.host.reads")
    page.clock.run_for(1000)  # one interval
    expect(view.locator("#items .content")).to_have_text(["Untold"], timeout=REDRAW_MS)
    assert page.evaluate("window.host.reads") == reads + 1

    # Torn down (the host's request, answered), it reads no more.
    assert page.evaluate("host.bridge.teardownResource({})") == {}
    page.clock.run_for(5000)
    # The view's messages arrive in order: any read it sent comes before its answer to this.
    assert page.evaluate("host.bridge.request({ method: 'ping' })") == {}
    assert page.evaluate("window.host.reads") == reads + 1
    assert page_errors == []


HOSTILE = [
    todo("<img src=x onerror=\"parent.postMessage({jsonrpc: '2.0', method: 'x'}, '*')\">"),
    todo("<script>document.body.remove()</script>", "in_progress"),
    todo("\u202eevil\u202c reversed, \u2066isolated\u2069, a\u200fmark, a\nnewline\tand tab"),
    todo("&lt;b&gt;entities stay&lt;/b&gt;", "completed"),
]
SHOWN = [
    "<img src=x onerror=\"parent.postMessage({jsonrpc: '2.0', method: 'x'}, '*')\">",
    "<script>document.body.remove()</script>",
    "\\u202eevil\\u202c reversed, \\u2066isolated\\u2069, a\\u200fmark, a\\nnewline\\tand tab",
    "&lt;b&gt;entities stay&lt;/b&gt;",
]


def test_hostile_content_renders_literally(
    page: Page, page_errors: PageErrors, host: AppHost
) -> None:
    write(host, *HOSTILE)
    view = opened(page, host)

    expect(view.locator("#items .content")).to_have_text(SHOWN)
    expect(view.locator("#now .content")).to_have_text([SHOWN[1]])
    frame = view_frame(page)
    assert frame.evaluate("document.querySelectorAll('img, b').length") == 0
    assert frame.evaluate("document.querySelectorAll('script').length") == 1  # the view's own
    texts = frame.evaluate(
        "[...document.querySelectorAll('#items .content')].map(node => node.firstChild.nodeType)"
    )
    assert texts == [3, 3, 3, 3]  # one text node each, nothing parsed
    assert page.evaluate("window.host.calls") == []  # the view called no tool of its own
    assert page_errors == []


def test_the_hosts_policy_is_in_force_and_the_view_keeps_to_it(
    page: Page, page_errors: PageErrors, host: AppHost
) -> None:
    write(host, todo("Anything", "in_progress"))
    opened(page, host)
    assert page_errors == []  # the view loaded, drew and polled without one refusal

    # The control: the same frame, asked to load an image from elsewhere, is refused.
    view_frame(page).evaluate(
        "() => { const img = document.createElement('img');"
        " img.src = 'http://127.0.0.9:9/x.png'; document.body.append(img); }"
    )
    deadline = time.monotonic() + 10
    while not any("Content Security Policy" in error for error in page_errors):
        assert time.monotonic() < deadline, page_errors
        page.wait_for_timeout(50)
    page_errors.clear()
