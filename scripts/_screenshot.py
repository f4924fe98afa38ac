"""What the scripts that draw the docs' pictures share: the command line (where the picture goes)
and a page in the headless Chromium the tests use."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

CHROMIUM = "/usr/bin/chromium"
HERE = Path(__file__).resolve().parent.parent


def picture_path(argv: list[str], doc: str | None, picture: str, example: str) -> Path:
    """The picture's path from ``argv`` (default: docs/``picture``); the help is ``doc``'s
    first line, then ``example``. Without Chromium, the usage error that says so."""
    parser = argparse.ArgumentParser(
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=doc.splitlines()[0] if doc else None,
        epilog=f"example: {example}",
    )
    parser.add_argument(
        "out",
        nargs="?",
        type=Path,
        default=HERE / "docs" / picture,
        metavar="OUT.png",
        help=f"where to write the picture (default: docs/{picture})",
    )
    out: Path = parser.parse_args(argv).out
    if not Path(CHROMIUM).exists():
        parser.error(f"{CHROMIUM} is missing: install it (apt-get install -y chromium)")
    return out


@contextmanager
def chromium_page(width: int, height: int) -> Iterator[Any]:
    """A page of that size in headless Chromium, closed with its browser at the end."""
    from playwright.sync_api import sync_playwright  # the dev extra's; --help needs none of it

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=["--no-sandbox"]
        )
        yield browser.new_page(viewport={"width": width, "height": height})
        browser.close()
