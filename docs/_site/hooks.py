"""mkdocs hooks: the READMEs as pages, and links to files outside docs/ that the site can follow.

The Markdown keeps the links a reader of the repository follows (``../src/...``,
``../CHANGELOG.md``, ``docs/cli.md`` from the README). The site has only what is under docs/ and
the repository has no public URL to point at, so on the site a link is rewritten:

- to a page of docs/: relative to where the page is built;
- to README.md or README.zh.md: to their pages, which this hook adds to the site;
- to a public module under ``src/dsh_tool_todo/``: to its API page (docs/api/);
- to any other file (CHANGELOG.md, tests/, scripts/, benchmarks/): the link's text, and the
  file's path in code when the text does not already name it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path, PurePosixPath
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PACKAGE = ROOT / "src" / "dsh_tool_todo"

# repository file -> the page of the site that shows it
PAGES_FROM_ROOT = {"README.md": "readme.md", "README.zh.md": "readme.zh.md"}

FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
CODE_SPAN = re.compile(r"(`+)(?:.+?)\1")
INLINE_LINK = re.compile(
    r"(?P<text>!?\[(?:[^\[\]]|\[[^\]]*\])*\])\((?P<target>[^()\s]+)(?P<title>\s+\"[^\"]*\")?\)"
)
LINK_DEFINITION = re.compile(
    r"^(?P<label> {0,3}\[[^\]]+\]:[ \t]*)(?P<target>\S+)(?P<rest>.*)$", re.MULTILINE
)
EXTERNAL = re.compile(r"^(?:[a-z][a-z0-9+.-]*:|#|/)", re.IGNORECASE)


class Outside(str):
    """A file of the repository outside docs/ that no page shows: ``path`` from the root."""

    @property
    def path(self) -> str:
        return str(self)


def on_files(files: Files, config: Any) -> Files:
    for source, page in PAGES_FROM_ROOT.items():
        files.append(File.generated(config, page, abs_src_path=str(ROOT / source)))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    src_uri = page.file.src_uri
    built_from = DOCS / src_uri
    written_in = next(
        (ROOT / source for source, target in PAGES_FROM_ROOT.items() if target == src_uri),
        built_from,
    )
    return rewrite(markdown, written_in=written_in.parent, built_in=built_from.parent)


def rewrite(markdown: str, *, written_in: Path, built_in: Path) -> str:
    """Every link of ``markdown``, read from ``written_in``, made to work from ``built_in``."""
    out = []
    prose: list[str] = []
    fence = ""
    for line in markdown.splitlines(keepends=True):
        opened = FENCE.match(line)
        if fence:
            if opened and opened.group(1).startswith(fence):
                fence = ""
            out.append(line)
        elif opened:
            out.append(_rewrite_prose("".join(prose), written_in, built_in))
            prose = []
            fence = opened.group(1)
            out.append(line)
        else:
            prose.append(line)
    out.append(_rewrite_prose("".join(prose), written_in, built_in))
    return "".join(out)


def _rewrite_prose(text: str, written_in: Path, built_in: Path) -> str:
    """The links of Markdown that holds no fenced code; a link may span lines."""
    # code spans are text: hidden (same length, no brackets) while the links are found, so a
    # link's text may hold code and a `[x](y)` inside code is left alone
    masked = CODE_SPAN.sub(lambda span: "`" * len(span.group(0)), text)
    pieces = []
    last = 0
    for link in INLINE_LINK.finditer(masked):
        label, target = text[link.start("text") : link.end("text")], link["target"]
        pieces.append(text[last : link.start()])
        pieces.append(_new_link(label, target, link["title"] or "", written_in, built_in))
        last = link.end()
    pieces.append(text[last:])
    text = "".join(pieces)
    return LINK_DEFINITION.sub(lambda found: _new_definition(found, written_in, built_in), text)


def _new_definition(found: re.Match[str], written_in: Path, built_in: Path) -> str:
    target = _site_target(found["target"], written_in, built_in)
    if isinstance(target, Outside):
        return found.group(0)  # a definition has no text to fall back to: mkdocs reports it
    return f"{found['label']}{target}{found['rest']}"


def _new_link(label: str, target: str, title: str, written_in: Path, built_in: Path) -> str:
    """``label`` is ``[text]`` or ``![alt]``, as written; ``title`` the link's, or empty."""
    new = _site_target(target, written_in, built_in)
    if not isinstance(new, Outside):
        return f"{label}({new}{title})"
    if label.startswith("!"):
        return f"{label}({target}{title})"  # an image the site lacks: mkdocs reports it
    text = label[1:-1]
    return text if new.path in text else f"{text} (`{new.path}` in the repository)"


def _site_target(target: str, written_in: Path, built_in: Path) -> str:
    """Where ``target`` goes on the site (as written when it is a URL or an anchor)."""
    if EXTERNAL.match(target):
        return target
    path_text, _, anchor = target.partition("#")
    path = (written_in / path_text).resolve()
    anchor = f"#{anchor}" if anchor else ""
    relative = _relative_to(path, ROOT)
    if relative in PAGES_FROM_ROOT:
        path = DOCS / PAGES_FROM_ROOT[relative]
    elif _relative_to(path, PACKAGE) is not None and (module := _api_page(path)) is not None:
        path, anchor = module
    elif _relative_to(path, DOCS) is None:
        return target if relative is None else Outside(relative)
    return PurePosixPath(os.path.relpath(path, built_in)).as_posix() + anchor


def _relative_to(path: Path, base: Path) -> str | None:
    try:
        return path.relative_to(base).as_posix()
    except ValueError:
        return None


def _api_page(path: Path) -> tuple[Path, str] | None:
    """The API page of a public module's source file, and the module's anchor on it."""
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    if any(part.startswith("_") for part in parts):
        return None
    module = ".".join(parts)
    for end in range(len(parts), 0, -1):  # a module without a page of its own is on its package's
        name = ".".join(parts[1:end]) or parts[0]
        page = DOCS / "api" / f"{name}.md"
        if page.is_file():
            return page, "" if end == len(parts) else f"#{module}"
    return None
