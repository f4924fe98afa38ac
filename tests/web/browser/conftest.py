"""Debian's Chromium driven by Playwright's sync API (no pytest-playwright, no browser download).

Chromium is started once per module, headless, off the network; each test gets
a fresh context and page, and fails on any script error the page raises.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, sync_playwright

from ..conftest import HOST, free_port

NO_CHROMIUM = (
    "no Chromium for the browser tests: install the machine's (apt-get install chromium) or "
    "Playwright's own (python -m playwright install chromium)"
)


def find_chromium() -> str | None:
    """The machine's Chromium, else the one Playwright installed for itself, else ``None``."""
    for candidate in ("/usr/bin/chromium", shutil.which("chromium")):
        if candidate and Path(candidate).exists():
            return candidate
    with contextlib.suppress(Exception), sync_playwright() as playwright:
        own = playwright.chromium.executable_path
        if own and Path(own).exists():
            return str(own)
    return None


CHROMIUM = find_chromium()
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def pytest_report_header() -> str:
    if CHROMIUM is None:
        return f"browser tests: {NO_CHROMIUM}"
    try:
        version = subprocess.run(
            [CHROMIUM, "--version"], capture_output=True, text=True, timeout=30, check=False
        ).stdout.strip()
    except OSError as error:
        version = f"missing ({error})"
    return f"browser tests: {CHROMIUM}: {version}"


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if CHROMIUM is None:
        if os.environ.get("CI") == "true":  # CI installs it: a missing browser is a failure there
            pytest.fail(NO_CHROMIUM, pytrace=False)
        pytest.skip(NO_CHROMIUM)
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
        )
        yield launched
        launched.close()


class PageErrors(list[str]):
    """Script errors and console errors a page reported."""


@pytest.fixture
def page_errors() -> PageErrors:
    return PageErrors()


@pytest.fixture
def page(browser: Browser, page_errors: PageErrors) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 900, "height": 800})
    opened = context.new_page()
    opened.on("pageerror", lambda error: page_errors.append(f"pageerror: {error}"))
    opened.on(
        "console",
        lambda message: (
            page_errors.append(f"console: {message.text}") if message.type == "error" else None
        ),
    )
    yield opened
    context.close()


class Proxy:
    """A TCP relay between the browser and the server whose connections a test can cut."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = free_port()
        self._listener = socket.create_server((HOST, self.port))
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self._lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection((HOST, self.target_port))
            except OSError:
                client.close()
                continue
            with self._lock:
                self._pairs.append((client, upstream))
            for source, target in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, target), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, target: socket.socket) -> None:
        try:
            while chunk := source.recv(65536):
                target.sendall(chunk)
        except OSError:
            pass
        finally:
            for end in (source, target):
                with contextlib.suppress(OSError):
                    end.shutdown(socket.SHUT_RDWR)

    def drop(self) -> int:
        """Cut every open connection, as a network would; how many were cut."""
        with self._lock:
            pairs, self._pairs = self._pairs, []
        for pair in pairs:
            for end in pair:
                with contextlib.suppress(OSError):
                    end.shutdown(socket.SHUT_RDWR)
                end.close()
        return len(pairs)

    def close(self) -> None:
        self._closed = True
        self._listener.close()
        self.drop()


@pytest.fixture
def proxy() -> Iterator[type[Proxy]]:
    made: list[Proxy] = []

    class Tracked(Proxy):
        def __init__(self, target_port: int) -> None:
            super().__init__(target_port)
            made.append(self)

    yield Tracked
    for relay in made:
        relay.close()
