"""Draw docs/mcp-app-view.png: the plan's MCP App view as a host draws it, in headless Chromium.

python scripts/mcp_app_screenshot.py [OUT.png]

The host is the one tests/web/browser/test_mcp_app.py drives: the Apps SDK's own
AppBridge in a page, relaying the view's reads to a real `dsh-todo mcp`. It needs
the dev extra and the node packages (`npm ci --prefix tests/node`).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from _screenshot import HERE, chromium_page, picture_path

PLAN = [
    {"content": "Reproduce the failing upload", "status": "completed"},
    {"content": "Find where the retry drops the part number", "status": "completed"},
    {"content": "Fix the retry and add a regression test", "status": "in_progress"},
    {"content": "Run the integration suite", "status": "pending"},
    {"content": "Write the changelog entry", "status": "pending"},
]


def main(argv: list[str]) -> int:
    example = "python scripts/mcp_app_screenshot.py /tmp/view.png"
    out = picture_path(argv, __doc__, "mcp-app-view.png", example).resolve()
    # the test host, from the dev extra and the node packages; --help needs none of it
    sys.path.insert(0, str(HERE))
    from tests.web.browser.mcp_app_host import app_host, bundle_bridge

    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        bundle = bundle_bridge(directory / "host.js")
        with app_host(directory / "plans", directory / "server.err", bundle) as host:
            arguments = {"name": "todo_write", "arguments": {"todos": PLAN}}
            host.mcp.relay("tools/call", arguments)
            with chromium_page(560, 400) as page:
                page.goto(host.url)
                view = page.frame_locator("iframe")
                view.locator('#plan[data-state="shown"]').wait_for()
                view.locator(".item").nth(len(PLAN) - 1).wait_for()
                page.locator("#views").screenshot(path=str(out))
    print(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
