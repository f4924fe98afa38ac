"""``json.loads`` of one log line, with less work per line and the very same answer.

A reader that stops at the latest ``todo/write`` or ``turn/start`` still checks
every line after it (a line that is not an event makes the log invalid, as a
full read says), so on a log whose plan is far back the cost is that of parsing
many lines; a full read parses them all. For lines of a few hundred bytes,
``json.loads`` spends about a third of its time outside its scanner: guessing
the encoding, two regex calls for the whitespace around the value, three Python
frames. :func:`loads_line` calls the very scanner ``json.loads`` uses on the
very text it would decode, where that provably changes nothing, and leaves every
other line to ``json.loads`` itself.

Not parsing the lines that cannot hold either type (a byte filter for ``write``
and ``start`` in every escaped form) would skip their check as well; checking
them with a faster parser (pydantic-core's, which refuses all that ``json``
refuses and a little more) measured slower than this, because the byte filter
costs about what the faster parse saves. See docs/benchmarks.md.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from json.scanner import make_scanner
from typing import Any

# The scanner json.loads's default decoder is built with (same options: the defaults).
_scan: Callable[[str, int], tuple[Any, int]] = make_scanner(json.JSONDecoder())  # type: ignore[arg-type]


def loads_line(line: bytes) -> Any:
    """``json.loads(line)``: the same value, or the same kind of error.

    ``json.loads`` of bytes picks the encoding from the first bytes, decodes with
    ``surrogatepass``, skips whitespace around the value and refuses anything
    after it. For a line that starts with ``{`` and a byte other than NUL and ends
    with ``}``, that is UTF-8, no leading whitespace, and a value that must end at
    the last character, so the scanner is called straight away. Any other line
    goes through ``json.loads``. Raises :class:`ValueError` (a
    :class:`json.JSONDecodeError` or :class:`UnicodeDecodeError`) or
    :class:`RecursionError`, as ``json.loads`` does.
    """
    if line[:1] != b"{" or line[-1:] != b"}" or line[1:2] == b"\0":
        return json.loads(line)
    text = line.decode("utf-8", "surrogatepass")
    try:
        value, end = _scan(text, 0)
    except StopIteration as stop:
        raise json.JSONDecodeError("Expecting value", text, stop.value) from None
    if end != len(text):
        raise json.JSONDecodeError("Extra data", text, end)
    return value
