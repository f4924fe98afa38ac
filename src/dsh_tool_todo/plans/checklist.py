"""The plan as a terminal checklist, and the escaping that keeps model text inert on a terminal.

>>> print(render_checklist([
...     {"content": "Write the parser", "status": "completed"},
...     {"content": "Test it", "status": "in_progress"},
...     {"content": "Document it", "status": "pending"},
... ]))
☑ Write the parser
► Test it
☐ Document it
1/3 completed, 1 in progress
"""

from __future__ import annotations

import os
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Protocol, TypedDict, cast

from ..core.contract import STATUSES
from ..core.model import Status
from ..errors import UsageError

__all__ = [
    "escape_content",
    "render_checklist",
    "stream_style",
]

Todos = Sequence[Mapping[str, object]]

# ► rather than ▶: ▶ is East Asian "ambiguous" width (two cells in CJK locales,
# which breaks the column) and an emoji codepoint some terminals paint in colour.
GLYPHS: Mapping[str, str] = {"pending": "☐", "in_progress": "►", "completed": "☑"}
ASCII_GLYPHS: Mapping[str, str] = {"pending": "[ ]", "in_progress": "[>]", "completed": "[x]"}
NO_PLAN = "No plan."

_RESET = "\x1b[0m"
_COLORS: Mapping[str, str] = {"pending": "", "in_progress": "\x1b[1;33m", "completed": "\x1b[32m"}

_SHORT_ESCAPES: Mapping[str, str] = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
# Explicit, so the guarantee does not rest on the Unicode database's categories.
_BIDI_CONTROLS = frozenset(chr(code) for code in (*range(0x202A, 0x202F), *range(0x2066, 0x206A)))
# Persian and Indic spelling and emoji sequences need the joiners; they move no cursor.
_JOINERS = frozenset("\u200c\u200d")


class ChecklistStyle(TypedDict):
    """Keyword arguments of :func:`render_checklist` that suit one output stream."""

    ascii: bool
    color: bool


class _TextStream(Protocol):
    def isatty(self) -> bool: ...


def escape_content(text: str, *, encoding: str | None = None) -> str:
    """``text`` with every character that could act on a terminal shown as an escape.

    C0 controls and DEL become ``\\xNN`` (``\\n``, ``\\r``, ``\\t`` for the usual
    three), C1 controls, bidi overrides and isolates and other non-printables
    ``\\uNNNN``. As ESC itself is escaped, no CSI or OSC sequence survives. With
    ``encoding``, characters it cannot encode are escaped too, so printing never
    fails. Backslashes are left alone: the aim is a safe display, not a
    reversible one, and doubling them would garble Windows paths.
    """
    if text.isprintable() and _encodes(text, encoding):
        return text
    return "".join(_escape_char(char, encoding) for char in text)


def plan_items(todos: Todos | None) -> list[tuple[str, Status]]:
    """The ``(content, status)`` pairs of a plan; ``None`` (no plan) gives none.

    Raises :class:`UsageError` for anything the tool could not have recorded.
    """
    if todos is None:
        return []
    if isinstance(todos, (str, bytes)) or not isinstance(todos, Sequence):
        raise UsageError(f"todos must be a list of {{content, status}}, not {type(todos).__name__}")
    items: list[tuple[str, Status]] = []
    for index, todo in enumerate(todos):
        if not isinstance(todo, Mapping):
            raise UsageError(f"todo at index {index} must be a mapping {{content, status}}")
        content, status = todo.get("content"), todo.get("status")
        if not isinstance(content, str):
            raise UsageError(f"todo at index {index}: content must be a string, got {content!r}")
        if status not in STATUSES:
            raise UsageError(
                f"todo at index {index}: status must be one of {', '.join(STATUSES)}, "
                f"got {status!r}"
            )
        items.append((content, cast(Status, status)))
    return items


def render_checklist(
    todos: Todos | None,
    *,
    ascii: bool | None = None,
    color: bool = False,
    encoding: str | None = None,
) -> str:
    """One line per todo (status glyph, escaped content), then a summary line.

    ``ascii=None`` uses the Unicode glyphs unless ``encoding`` cannot encode them.
    ``color`` adds ANSI colour; pass it only for a terminal. An empty list or
    ``None`` renders :data:`NO_PLAN`. The text has no trailing newline.
    """
    items = plan_items(todos)
    if not items:
        return NO_PLAN
    use_ascii = not glyphs_encodable(encoding) if ascii is None else ascii
    glyphs = ASCII_GLYPHS if use_ascii else GLYPHS
    lines = []
    for content, status in items:
        line = f"{glyphs[status]} {escape_content(content, encoding=encoding)}"
        sgr = _COLORS[status] if color else ""
        lines.append(f"{sgr}{line}{_RESET}" if sgr else line)
    statuses = [status for _, status in items]
    lines.append(
        f"{statuses.count('completed')}/{len(items)} completed, "
        f"{statuses.count('in_progress')} in progress"
    )
    return "\n".join(lines)


def glyphs_encodable(encoding: str | None) -> bool:
    """Whether ``encoding`` can carry the Unicode glyphs (``None``: assume it can).

    An encoding Python does not know is taken for ASCII, which always prints.
    """
    return encoding is None or _encodes("".join(GLYPHS.values()), encoding)


def stream_style(
    stream: _TextStream, *, environ: Mapping[str, str] | None = None
) -> ChecklistStyle:
    """The ``ascii`` and ``color`` choices for writing to ``stream``.

    ASCII when the stream's encoding cannot carry the glyphs; colour only on a
    terminal, and never when ``NO_COLOR`` is set (https://no-color.org) or
    ``TERM=dumb``. Use it as ``render_checklist(todos, **stream_style(sys.stdout))``.
    """
    env = os.environ if environ is None else environ
    encoding = getattr(stream, "encoding", None)
    color = stream.isatty() and not env.get("NO_COLOR") and env.get("TERM") != "dumb"
    return {
        "ascii": not glyphs_encodable(encoding if isinstance(encoding, str) else None),
        "color": color,
    }


def _escape_char(char: str, encoding: str | None) -> str:
    code = ord(char)
    if code < 0x20 or code == 0x7F:
        return _SHORT_ESCAPES.get(char, f"\\x{code:02x}")
    if 0x80 <= code < 0xA0 or char in _BIDI_CONTROLS:
        return f"\\u{code:04x}"
    shown = char.isprintable() or char in _JOINERS or unicodedata.category(char) == "Zs"
    if shown and _encodes(char, encoding):
        return char
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def _encodes(text: str, encoding: str | None) -> bool:
    if encoding is None:
        return True
    try:
        text.encode(encoding)
    except UnicodeError:
        return False
    except LookupError:  # an encoding Python does not know is taken for ASCII
        return text.isascii()
    return True
