"""Turn pydantic's validation errors into the stable texts the model reads.

Only the first error is reported: it names the index, the key and what to send
instead, which is enough for a model to correct the whole list in one retry.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError

from . import contract as text
from .errors import ToolCallRejected

_SHOWN = 40
_JSON_TYPES = {str: "string", bool: "boolean", int: "number", float: "number", type(None): "null"}


def rejection_for(error: ValidationError, *, raw_json: bool) -> ToolCallRejected:
    first = error.errors(include_url=False)[0]
    if first["type"] == "string_unicode":
        return ToolCallRejected(_lone_surrogate(first["loc"], first["input"], raw_json=raw_json))
    return ToolCallRejected(_text_for(first["type"], first["loc"], first))


def _lone_surrogate(loc: tuple[int | str, ...], key: object, *, raw_json: bool) -> str:
    """pydantic reports a lone surrogate in JSON text, or in a mapping's key, without a place."""
    if raw_json:
        return text.NOT_JSON.format(reason="it holds a lone surrogate, which is not text")
    if not loc:
        return text.UNKNOWN_ARGUMENT.format(key=_describe(key))
    return text.UNKNOWN_ITEM_KEY.format(index=loc[1], key=_describe(key))


def _text_for(kind: str, loc: tuple[int | str, ...], detail: Any) -> str:
    if not loc:
        if kind == "json_invalid":
            return text.NOT_JSON.format(reason=detail.get("ctx", {}).get("error", "malformed"))
        return text.ARGS_NOT_OBJECT.format()
    if loc[0] != "todos" or (kind == "invalid_key" and len(loc) == 1):
        return text.UNKNOWN_ARGUMENT.format(key=_key(loc[0]))
    if len(loc) == 1:
        template = text.MISSING_TODOS if kind == "missing" else text.TODOS_NOT_ARRAY
        return template.format()
    index = loc[1]
    if len(loc) == 2:
        return text.ITEM_NOT_OBJECT.format(index=index)
    field = loc[2]
    if kind in ("extra_forbidden", "invalid_key"):
        return text.UNKNOWN_ITEM_KEY.format(index=index, key=_key(field))
    if kind == "missing":
        expected = text.MISSING_FIELD_EXPECTS[str(field)]
        return text.MISSING_FIELD.format(index=index, field=field, expected=expected)
    got = _describe(detail.get("input"))
    if field == "content":
        return text.CONTENT_NOT_STRING.format(index=index, got=got)
    return text.BAD_STATUS.format(index=index, got=got)


def _key(key: int | str) -> str:
    if isinstance(key, str) and key.isprintable() and "`" not in key and len(key) <= _SHOWN:
        return f"`{key}`"
    return _describe(key) if isinstance(key, str) else f"`{key!r}`"


def printable(value: str) -> str:
    """``value`` with lone surrogates escaped, so the text can always be sent as UTF-8."""
    return value.encode("utf-8", "backslashreplace").decode("utf-8")


def _describe(value: object) -> str:
    """Show a value the model sent, quoted, short, and safe to print anywhere."""
    if isinstance(value, str):
        shown = value if len(value) <= _SHOWN else value[:_SHOWN] + "…"
        return printable(json.dumps(shown, ensure_ascii=False))
    return _JSON_TYPES.get(type(value), "array" if isinstance(value, list) else "object")
