"""The AI SDK a reader installs from the docs is the one the node tests read the plan with.

``npm install ai`` gives npm's latest major version, which moves on its own; the docs name the
major version ``tests/node/package.json`` pins, so the reader code they print is the tested one.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NPM_INSTALL = re.compile(r"npm (?:install|i|add) ([^\n`#]+)")


def ai_installs(text: str) -> list[str]:
    """The ``ai`` package arguments of each ``npm install`` the text prints."""
    return [
        word
        for arguments in NPM_INSTALL.findall(text)
        for word in arguments.split()
        if word == "ai" or word.startswith("ai@")
    ]


def test_the_docs_install_the_ai_sdk_major_version_the_node_tests_run() -> None:
    package = json.loads((ROOT / "tests" / "node" / "package.json").read_text(encoding="utf-8"))
    major = package["dependencies"]["ai"].lstrip("^~").split(".")[0]
    pages = [ROOT / "README.md", ROOT / "README.zh.md", *sorted((ROOT / "docs").rglob("*.md"))]
    installs = {
        page.relative_to(ROOT).as_posix(): ai_installs(page.read_text(encoding="utf-8"))
        for page in pages
        if "_site" not in page.parts
    }

    assert installs["docs/wire-formats.md"], "the AI SDK section says what to install"
    for page, words in installs.items():
        assert all(word == f"ai@{major}" for word in words), (page, words, major)


def test_a_bare_install_is_caught() -> None:
    assert ai_installs("```sh\nnpm install ai zod\n```") == ["ai"]
    assert ai_installs("run `npm i ai@7` first") == ["ai@7"]
