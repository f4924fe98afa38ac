"""Draw docs/fleet-tree.png: the session list as a tree, in the headless Chromium the tests use.

python scripts/fleet_tree_screenshot.py [OUT.png]
"""

from __future__ import annotations

import socket
import subprocess
import sys
import tempfile
from pathlib import Path

from _screenshot import chromium_page, picture_path

from dsh_tool_todo.stores.jsonl import JsonlSession


def todo(content: str, status: str = "pending") -> dict[str, str]:
    return {"content": content, "status": status}


def log(directory: Path, name: str, parent: str | None, *writes: list[dict[str, str]]) -> None:
    with JsonlSession(directory / f"{name}.jsonl", parent=parent) as session:
        session.append("turn/start", {})
        for todos in writes:
            session.append("todo/write", {"todos": todos})


def fleet(directory: Path) -> None:
    log(
        directory,
        "lead",
        None,
        [
            todo("Split the release review", "completed"),
            todo("Collect the findings", "in_progress"),
            todo("Write the summary"),
        ],
    )
    log(
        directory,
        "changelog-reader",
        "lead",
        [todo("Read CHANGELOG", "completed"), todo("List breaking changes", "in_progress")],
    )
    log(
        directory,
        "test-runner",
        "lead",
        [todo("Run unit tests"), todo("Run browser tests"), todo("Report flakes")],
        [todo("Run unit tests", "in_progress")],
    )  # two items dropped unfinished
    log(
        directory,
        "browser-checker",
        "test-runner",
        [todo("Start Chromium", "completed"), todo("Check the tree page", "in_progress")],
    )
    log(
        directory,
        "docs-checker",
        "changelog-reader",
        [todo("Check links", "completed"), todo("Check examples", "completed")],
    )
    log(directory, "orphan-agent", "gone-session", [todo("Resume work", "in_progress")])


def main(argv: list[str]) -> int:
    example = "python scripts/fleet_tree_screenshot.py /tmp/tree.png"
    out = picture_path(argv, __doc__, "fleet-tree.png", example)
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        fleet(directory)
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        command = [sys.executable, "-m", "dsh_tool_todo", "serve", tmp, "--port", str(port)]
        server = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
        try:
            assert server.stdout is not None
            while "Ctrl-C" not in server.stdout.readline():
                if server.poll() is not None:
                    raise SystemExit("the server did not start")
            with chromium_page(760, 620) as page:
                page.goto(f"http://127.0.0.1:{port}/")
                page.locator('li.session[data-name="browser-checker"]').wait_for()
                page.screenshot(path=str(out), full_page=True)
        finally:
            server.terminate()
            server.wait(timeout=10)
    print(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
