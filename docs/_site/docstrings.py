"""A griffe extension: the package's reST-flavoured docstrings, read as the Markdown mkdocs renders.

The docstrings are written for ``help()`` and an editor: Sphinx roles (``:class:`~a.B```),
``::`` before an indented example, and doctest sessions. On the API pages (docs/api/) a role
becomes a cross-reference to the object's entry (plain code when the object has none: the
reference is optional, so it never fails the build), a ``::`` block and a doctest session
become fenced code, and a ``docs/PAGE.md`` named in a docstring links to that page.
"""

from __future__ import annotations

import html
import re
import textwrap
from typing import Any

import griffe

ROLE = re.compile(r":(?:py:)?(?:class|func|meth|attr|mod|data|exc|obj|const):`(?P<target>[^`]+)`")
DOC_PAGE = re.compile(
    r"``(?P<double>docs/[\w/.-]+\.md)``|(?<![\w/`(\[])(?P<plain>docs/[\w/-]+\.md)"
)
DOCTEST = re.compile(r"^\s*>>> ")


class ReadAsMarkdown(griffe.Extension):
    """Rewrite every docstring of the loaded package before mkdocstrings renders it."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        for obj in _objects(pkg):
            if obj.docstring is not None:
                obj.docstring.value = as_markdown(obj.docstring.value, obj)
            if obj.parent is not None and _is_machinery(obj):
                # removed, not marked private: a re-export (an alias) reads its target's members
                del obj.parent.members[obj.name]


def _is_machinery(obj: griffe.Object) -> bool:
    """``__all__``, ``__slots__``, ``__pydantic_config__``, ``__post_init__``: how, not what; and
    an undocumented ``self.x = x`` of an ``__init__``, which the class's signature shows.

    griffe counts every special name as public; the special methods a reader calls (``__call__``,
    ``__enter__``, ``__aiter__``...) stay.
    """
    special = obj.name.startswith("__") and obj.name.endswith("__")
    if special:
        return obj.is_attribute or obj.name == "__post_init__"
    return obj.is_attribute and "instance-attribute" in obj.labels and obj.docstring is None


def _objects(obj: griffe.Object) -> list[griffe.Object]:
    found = [obj]
    for member in obj.members.values():
        if not member.is_alias:
            found.extend(_objects(member))  # type: ignore[arg-type]
    return found


def as_markdown(text: str, obj: griffe.Object) -> str:
    lines = _fence_code(text.splitlines())
    return "\n".join(_inline(line, obj) if not code else line for line, code in lines)


def _fence_code(lines: list[str]) -> list[tuple[str, bool]]:
    """Each line, and whether it is inside a fenced block this function made or found."""
    out: list[tuple[str, bool]] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        if line.lstrip().startswith("```"):  # already Markdown: copy the block as it is
            end = next(
                (i for i in range(index + 1, len(lines)) if lines[i].lstrip().startswith("```")),
                len(lines) - 1,
            )
            out.extend((each, True) for each in lines[index : end + 1])
            index = end + 1
        elif DOCTEST.match(line):
            end = index
            while end < len(lines) and lines[end].strip():
                end += 1
            out.extend(_fenced(lines[index:end], "pycon"))
            index = end
        elif line.rstrip().endswith("::") and _indented_block_follows(lines, index):
            intro = line.rstrip()[:-2].rstrip()
            if intro:
                out.append((intro + ":", False))
            end = index + 2
            indent = len(lines[index]) - len(lines[index].lstrip())
            while end < len(lines) and (
                not lines[end].strip() or len(lines[end]) - len(lines[end].lstrip()) > indent
            ):
                end += 1
            while end > index + 2 and not lines[end - 1].strip():
                end -= 1
            out.append(("", False))
            out.extend(_fenced(lines[index + 2 : end], "python"))
            index = end
        else:
            out.append((line, False))
            index += 1
    return out


def _indented_block_follows(lines: list[str], index: int) -> bool:
    if index + 2 >= len(lines) or lines[index + 1].strip():
        return False
    indent = len(lines[index]) - len(lines[index].lstrip())
    following = lines[index + 2]
    return bool(following.strip()) and len(following) - len(following.lstrip()) > indent


def _fenced(block: list[str], language: str) -> list[tuple[str, bool]]:
    body = textwrap.dedent("\n".join(block)).splitlines()
    return [(f"```{language}", True), *((line, True) for line in body), ("```", True)]


def _inline(line: str, obj: griffe.Object) -> str:
    line = ROLE.sub(lambda role: _reference(role["target"], obj), line)
    return DOC_PAGE.sub(_page_link, line)


def _reference(target: str, obj: griffe.Object) -> str:
    short = target.startswith("~")
    name = target.lstrip("~")
    title = name.rpartition(".")[2] if short else name.lstrip(".")
    identifier = html.escape(_resolve(name, obj), quote=True)
    return (
        f'<autoref identifier="{identifier}" optional><code>{html.escape(title)}</code></autoref>'
    )


def _resolve(name: str, obj: griffe.Object) -> str:
    """The full path of ``name`` as written in ``obj``'s docstring (as written when unknown)."""
    module = obj.module
    if name.startswith("."):  # relative to the module's package, as in an import
        level = len(name) - len(name.lstrip("."))
        package = module.path.split(".")
        if not module.is_package:
            package = package[:-1]
        return ".".join([*package[: len(package) - level + 1], name.lstrip(".")])
    first, _, rest = name.partition(".")
    scope = obj if obj.is_class or obj.is_module or obj.parent is None else obj.parent
    try:
        path = scope.resolve(first)  # its members and imports, then its parents'
    except griffe.NameResolutionError:
        return name
    return f"{path}.{rest}" if rest else path


def _page_link(found: re.Match[str]) -> str:
    page = found["double"] or found["plain"]
    # the API pages are docs/api/NAME.md: a page of docs/ is one level up
    return f"[`{page}`](../{page.removeprefix('docs/')})"
