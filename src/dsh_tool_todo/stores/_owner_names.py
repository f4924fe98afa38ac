"""Owner keys as file names, and back: how an owner registry names its owners' JSONL logs.

The file-name encoding (see ``docs/owners.md``): characters ``a-z``, ``0-9``,
``-``, ``_`` and ``.`` stand for themselves; every other character, an
upper-case letter, a leading or trailing ``.``, and the first character of a
name Windows reserves (``con``, ``nul``, ``com1`` ...) is written as ``%xx``
per UTF-8 byte, in lower-case hex. So a name is lower case, never hidden, never
``.`` or ``..``, never holds a separator or NUL, and two keys that differ only
in case get names that differ on a case-insensitive file system too. A key
whose name would exceed 255 bytes with its ``.jsonl`` suffix is refused rather
than shortened, since a shortened name could not be decoded back.
"""

from __future__ import annotations

from ..errors import OwnerNameError

__all__: list[str] = []

SUFFIX = ".jsonl"
MAX_NAME_BYTES = 255 - len(SUFFIX)
"""The longest encoded name: 255 bytes, the usual per-name limit, less the suffix."""

_LITERAL = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-_.")
_HEX = frozenset("0123456789abcdef")
_RESERVED = frozenset(
    ["con", "prn", "aux", "nul"]
    + [f"{device}{digit}" for device in ("com", "lpt") for digit in "123456789"]
)


def owner_file_name(key: str) -> str:
    """The file name (``<name>.jsonl``) that holds ``key``'s session log; reversible.

    Raises :class:`OwnerNameError` for an empty key and for a key whose name
    would be longer than :data:`MAX_NAME_BYTES` (``%xx`` takes 3 bytes per
    escaped UTF-8 byte, so at most 249 plain characters, 83 upper-case letters).
    """
    if not isinstance(key, str):
        raise OwnerNameError(f"an owner key must be a string, not {type(key).__name__}")
    if not key:
        raise OwnerNameError("an owner key must be a non-empty string")
    last = len(key) - 1
    parts = [
        char if char in _LITERAL and not (char == "." and index in (0, last)) else _escape(char)
        for index, char in enumerate(key)
    ]
    if key.split(".", 1)[0] in _RESERVED:
        parts[0] = _escape(parts[0])
    name = "".join(parts)
    if len(name) > MAX_NAME_BYTES:
        raise OwnerNameError(
            f"owner key too long for a file name: it encodes to {len(name)} bytes "
            f"(at most {MAX_NAME_BYTES}); use a shorter key, e.g. a hash of it"
        )
    return name + SUFFIX


def owner_key(file_stem: str) -> str:
    """The owner key whose file is ``<file_stem>.jsonl``: the inverse of :func:`owner_file_name`.

    Raises :class:`OwnerNameError` for a stem that :func:`owner_file_name`
    does not produce (a file someone else put in the directory), so a reader
    of the directory can skip it.
    """
    chars: list[str] = []
    pending = bytearray()
    index = 0
    try:
        while index < len(file_stem):
            char = file_stem[index]
            if char == "%":
                digits = file_stem[index + 1 : index + 3]
                if len(digits) != 2 or not _HEX.issuperset(digits):
                    raise ValueError(digits)
                pending.append(int(digits, 16))
                index += 3
                continue
            if pending:
                chars.append(pending.decode("utf-8", "surrogatepass"))
                pending.clear()
            chars.append(char)
            index += 1
        chars.append(pending.decode("utf-8", "surrogatepass"))
        key = "".join(chars)
        canonical = owner_file_name(key) == file_stem + SUFFIX
    except (ValueError, OwnerNameError):
        canonical = False
    if not canonical:
        raise OwnerNameError(f"{file_stem!r} is not an owner file name (see owner_file_name)")
    return key


def _escape(char: str) -> str:
    return "".join(f"%{byte:02x}" for byte in char.encode("utf-8", "surrogatepass"))
