"""Draw docs/mcp-app-view.png: the plan's MCP App view as a host draws it, in headless Chromium.

python scripts/mcp_app_screenshot.py [OUT.png]

The host is the one tests/web/browser/test_mcp_app.py drives: the Apps SDK's own
AppBridge in a page, relaying the view's reads to a real `dsh-todo mcp`. It needs
the dev extra and the node packages (`npm ci --prefix tests/node`).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

CHROMIUM = "/usr/bin/chromium"
HERE = Path(__file__).resolve().parent.parent
PLAN = [
    {"content": "Reproduce the failing upload", "status": "completed"},
    {"content": "Find where the retry drops the part number", "status": "completed"},
    {"content": "Fix the retry and add a regression test", "status": "in_progress"},
    {"content": "Run the integration suite", "status": "pending"},
    {"content": "Write the changelog entry", "status": "pending"},
]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=__doc__.splitlines()[0] if __doc__ else None,
        epilog="example: python scripts/mcp_app_screenshot.py /tmp/view.png",
    )
    parser.add_argument(
        "out",
        nargs="?",
        type=Path,
        default=HERE / "docs" / "mcp-app-view.png",
        metavar="OUT.png",
        help="where to write the picture (default: docs/mcp-app-view.png)",
    )
    out = parser.parse_args(argv).out.resolve()
    if not Path(CHROMIUM).exists():
        parser.error(f"{CHROMIUM} is missing: install it (apt-get install -y chromium)")
    # the dev extra's and the test host's; --help needs none of it
    from playwright.sync_api import sync_playwright

    sys.path.insert(0, str(HERE))
    from tests.web.browser.mcp_app_host import app_host, bundle_bridge

    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        bundle = bundle_bridge(directory / "host.js")
        with app_host(directory / "plans", directory / "server.err", bundle) as host:
            arguments = {"name": "todo_write", "arguments": {"todos": PLAN}}
            host.mcp.relay("tools/call", arguments)
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(
                    executable_path=CHROMIUM, headless=True, args=["--no-sandbox"]
                )
                page: Any = browser.new_page(viewport={"width": 560, "height": 400})
                page.goto(host.url)
                view = page.frame_locator("iframe")
                view.locator('#plan[data-state="shown"]').wait_for()
                view.locator(".item").nth(len(PLAN) - 1).wait_for()
                page.locator("#views").screenshot(path=str(out))
                browser.close()
    print(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
