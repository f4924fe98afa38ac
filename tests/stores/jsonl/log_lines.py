"""What the listing tests of the JSONL reader write and how they wait for it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

WITHIN = 20.0  # seconds a listing test waits for anything


def line(seq: int, kind: str, data: object) -> bytes:
    """One event as a line of a log."""
    return json.dumps({"seq": seq, "type": kind, "data": data}).encode() + b"\n"


def append_lines(path: Path, *lines: bytes) -> None:
    """Append ``lines`` to the log at ``path`` in one write."""
    with path.open("ab") as log:
        log.write(b"".join(lines))


def run_within(coro: Coroutine[Any, Any, Any]) -> Any:
    """Run ``coro`` to its end, failing if it takes more than ``WITHIN`` seconds."""
    return asyncio.run(asyncio.wait_for(coro, WITHIN))
