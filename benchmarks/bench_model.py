"""Row 9: the model's experience of a refusal, and what a refusal costs.

* Calls to accept: each argument habit seen in real use (tests/literal_model.py), sent as it
  is and with its list as a JSON string, through the "literal model" that changes exactly
  what the error names, in both modes. Target: at most 2 calls (one retry).
* Refusing a 2 MB bad call (``{"todos": [0, 0, ...]}`` and 2 MB of items with a foreign
  status each) against ``json.loads`` of the same text: time (median of runs) and traced
  peak memory. Before the fix, the first cost 8.6 s and 1.1 GB.
"""

from __future__ import annotations

import json
import sys
import tracemalloc
from collections.abc import Callable
from pathlib import Path

from report import Row, fmt_bytes
from timing import median_seconds

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests package

from tests.literal_model import ALL_SHAPES, calls_to_accept

from dsh_tool_todo.core import contract
from dsh_tool_todo.core._validation import validate_call
from dsh_tool_todo.core.tool import todo_write_tool
from dsh_tool_todo.errors import ToolCallRejected

CALLS_TARGET = 2
TIME_TARGET = 10.0  # refusing vs decoding the same text
MEMORY_TARGET = 3.0
TWO_MB = 2 * 2**20


def _clauses(text: str) -> int:
    """How many problems a text names: its clauses, less the hints."""
    hints = (contract.ARGUMENTS_HINT, contract.ITEMS_HINT.format())
    body = text.split(": ", 1)[1]
    return sum(part not in hints for part in body.split(contract.CLAUSE_SEPARATOR))


def calls_rows() -> list[Row]:
    tools = {
        parallel: todo_write_tool(allow_parallel_in_progress=parallel) for parallel in (False, True)
    }
    rows = []
    for name, args in ALL_SHAPES.items():
        strict, texts = calls_to_accept(tools[False], args)
        parallel, _ = calls_to_accept(tools[True], args)
        worst = max(strict, parallel)
        rows.append(
            Row(
                "9 model: calls to accept",
                name,
                f"{strict} strict, {parallel} parallel",
                f"first error: {len(texts[0])} chars",
                None,
                f"≤{CALLS_TARGET} calls",
                worst <= CALLS_TARGET,
                note=f"first error names ~{_clauses(texts[0])} problem kinds",
                numbers={"strict": strict, "parallel": parallel, "first_error": texts[0]},
            )
        )
    return rows


def _zeros() -> str:
    count = (TWO_MB - len('{"todos":[]}')) // 2
    return '{"todos":[' + ",".join(["0"] * count) + "]}"


def _foreign_statuses() -> str:
    item = '{"content":"Step %07d of the plan","status":"done %d"}'
    items = []
    size = 0
    while size < TWO_MB:
        items.append(item % (len(items), len(items)))
        size += len(items[-1]) + 1
    return '{"todos":[' + ",".join(items) + "]}"


def _refuse(raw: str) -> Callable[[], object]:
    def refuse() -> object:
        try:
            validate_call(raw, allow_parallel=False)
        except ToolCallRejected as rejected:
            return rejected.model_text
        raise AssertionError("a bad call was accepted")

    return refuse


def _peak(call: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        call()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def refusal_rows(repeats: int) -> list[Row]:
    rows = []
    validate_call({"todos": []}, allow_parallel=False)  # the validator is built outside
    for case, raw in (
        ('2 MB {"todos": [0, 0, ...]}', _zeros()),
        ("2 MB of items, each a foreign status", _foreign_statuses()),
    ):
        refuse = _refuse(raw)
        text = str(refuse())

        def decode(raw: str = raw) -> object:
            return json.loads(raw)

        ours = median_seconds(refuse, repeats=repeats)
        floor = median_seconds(decode, repeats=repeats)
        rows.append(
            Row(
                "9 refusal vs json.loads: time",
                case,
                f"refused in {ours * 1e3:.0f} ms",
                f"json.loads {floor * 1e3:.0f} ms",
                ours / floor,
                f"≤{TIME_TARGET:.0f}x",
                ours / floor <= TIME_TARGET,
                note=f"error: {len(text)} chars",
                numbers={"refuse_s": ours, "loads_s": floor, "text": text},
            )
        )
        ours_peak, floor_peak = _peak(refuse), _peak(decode)
        rows.append(
            Row(
                "9 refusal vs json.loads: memory",
                case,
                f"peak {fmt_bytes(ours_peak)}",
                f"peak {fmt_bytes(floor_peak)}",
                ours_peak / floor_peak,
                f"≤{MEMORY_TARGET:.0f}x",
                ours_peak / floor_peak <= MEMORY_TARGET,
                note="traced Python allocations",
                numbers={"refuse_peak": ours_peak, "loads_peak": floor_peak},
            )
        )
    return rows


def rows(repeats: int = 5) -> list[Row]:
    return [*calls_rows(), *refusal_rows(repeats)]
