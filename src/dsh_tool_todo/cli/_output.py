"""How ``dsh-todo`` writes: machine formats as UTF-8, human text escaped for the stream's
encoding, the checklist drawn for the terminal, and an error or warning as one line."""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Callable
from functools import partial
from typing import Any, TextIO, cast

from ..plans.checklist import escape_content, glyphs_encodable, render_checklist, stream_style

__all__: list[str] = []

EXIT_CLOSED_PIPE = 141  # as a shell reports a command that SIGPIPE ended: `| head` closed it


def drawer(out: TextIO, ascii_only: bool) -> Callable[[Any], str]:
    style = stream_style(out)
    encoding = "ascii" if ascii_only else getattr(out, "encoding", None)
    ascii_glyphs = True if ascii_only else style["ascii"]
    return partial(render_checklist, ascii=ascii_glyphs, color=style["color"], encoding=encoding)


def print_utf8(out: TextIO, text: str) -> None:
    """Print a machine format as UTF-8 whatever the locale, lone surrogates as JSON escapes.

    In JSON text a lone surrogate can only stand inside a string, where
    ``backslashreplace``'s ``\\udXXX`` is the escape that reads it back.
    """
    data = (text + "\n").encode("utf-8", "backslashreplace")
    buffer = getattr(out, "buffer", None)
    if buffer is None:  # a text-only stream, as tests pass: it takes str
        out.write(data.decode("utf-8"))
        return
    out.flush()
    buffer.write(data)
    buffer.flush()


def text_out(out: TextIO, ascii_only: bool) -> TextIO:
    """``out`` for human text: what its encoding cannot show is escaped, never an error.

    With ``--ascii``, or an encoding without the checklist glyphs, the arrows
    and dashes become ASCII look-alikes and the rest is escaped.
    """
    encoding = getattr(out, "encoding", None)
    if ascii_only or not glyphs_encodable(encoding):
        return cast(TextIO, _Transliterated(out, "ascii" if ascii_only else encoding or "ascii"))
    if isinstance(out, io.TextIOWrapper):
        out.reconfigure(errors="backslashreplace")
    return out


class _Transliterated:
    """What ``print`` needs of a text stream, writing to another in a narrower encoding."""

    _FORMS = str.maketrans({"→": "->", "—": "-", "–": "-", "…": "...", "’": "'", "►": ">"})

    def __init__(self, out: TextIO, encoding: str) -> None:
        self._out = out
        self.encoding = encoding

    def write(self, text: str) -> int:
        shown = text.translate(self._FORMS).encode(self.encoding, "backslashreplace")
        self._out.write(shown.decode(self.encoding))
        return len(text)

    def flush(self) -> None:
        self._out.flush()

    def isatty(self) -> bool:
        return self._out.isatty()


def clear_screen(out: TextIO) -> str:
    """The sequence that clears a terminal before a redraw; none when piped or TERM=dumb."""
    return "\x1b[H\x1b[2J" if out.isatty() and os.environ.get("TERM") != "dumb" else ""


def reader_gone(out: TextIO) -> int:
    """End quietly when the reader closed the pipe (``| head``), with the status of SIGPIPE.

    Python flushes standard output again at exit; pointing it at the null
    device keeps that flush from failing with a message.
    """
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, out.fileno())
        os.close(null)
    except (OSError, ValueError, io.UnsupportedOperation):
        pass
    return EXIT_CLOSED_PIPE


def warn_in_one_line(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    shown = escape_content(str(message), encoding=getattr(sys.stderr, "encoding", None))
    print(f"dsh-todo: warning: {shown}", file=sys.stderr)


def shown_path(path: object, out: TextIO | None = None) -> str:
    """A path or name as a message prints it: control characters (a newline, an ESC
    sequence) escaped as the checklist escapes content, and what ``out`` cannot encode."""
    text = os.fsdecode(path) if isinstance(path, (str, bytes, os.PathLike)) else str(path)
    return escape_content(text, encoding=getattr(out or sys.stderr, "encoding", None))


def reason(error: BaseException) -> str:
    """The error's message, one line, escaped: a source named with control bytes (an ESC
    sequence, a newline) is shown whole, never acted on by the terminal nor split over lines
    (the stores' own messages are one line: a server's DETAIL and HINT are left out there)."""
    if isinstance(error, OSError) and error.strerror and error.filename:
        return shown_path(error.filename) + ": " + shown_path(error.strerror)
    text = str(error).strip("\n")
    if not text:
        return type(error).__name__
    return shown_path(text)
