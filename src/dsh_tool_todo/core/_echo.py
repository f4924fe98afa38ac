"""How an error shows what the model sent: one short, inert line per echoed key or value.

Every key and value a refusal names goes through :func:`echo`, so each error stays one line
that can always be sent as UTF-8, whatever the model put in its arguments.
"""

from __future__ import annotations

SHOWN = 40  # characters of an echoed key or value
_JSON_TYPES = {str: "string", bool: "boolean", int: "number", float: "number", type(None): "null"}


def _escaped(char: str, quoted: bool) -> str:
    code = ord(char)
    if code < 0x20 or 0x7F <= code < 0xA0 or code in (0x2028, 0x2029) or 0xD800 <= code < 0xE000:
        return f"\\u{code:04x}"
    if quoted and char in '"\\':
        return "\\" + char
    return char


def echo(value: str, limit: int = SHOWN, *, quoted: bool = False) -> str:
    """``value`` as an error may show it: control characters (C0, DEL, C1), line separators
    and lone surrogates escaped as ``\\uXXXX``, cut to ``limit`` characters with ``…``.

    The one helper for every echoed key and value, so each error stays one short, inert line
    that can always be sent as UTF-8. A printable value of at most ``limit`` characters comes
    back unchanged (``quoted`` adds JSON's escapes for quotes and backslashes).
    """
    head = value[:limit]
    if head.isprintable() and not (quoted and ('"' in head or "\\" in head)):
        return head if len(value) <= limit else head + "…"
    pieces: list[str] = []
    size = 0
    for char in head:
        piece = _escaped(char, quoted)
        if size + len(piece) > limit:
            return "".join(pieces) + "…"
        pieces.append(piece)
        size += len(piece)
    return "".join(pieces) if len(value) <= limit else "".join(pieces) + "…"


def describe(value: object) -> str:
    """A value the model sent: a string quoted and cut, anything else its JSON type."""
    if isinstance(value, str):
        return f'"{echo(value, quoted=True)}"'
    return type_name(type(value))


def describe_type(value: object) -> str:
    """A value's JSON type as a clause names it (``string`` for any string)."""
    return describe(value) if not isinstance(value, str) else "string"


def type_name(kind: type) -> str:
    if issubclass(kind, list):
        return "array"
    if issubclass(kind, dict):
        return "object"
    return _JSON_TYPES.get(kind, kind.__name__)


def key_name(key: object) -> str:
    """A key or argument name: in backticks when plain, quoted otherwise."""
    if isinstance(key, str):
        if key.isprintable() and "`" not in key and 0 < len(key) <= SHOWN:
            return f"`{key}`"
        return describe(key)
    return f"`{echo(repr(key))}`"
