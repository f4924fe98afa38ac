"""Row 4: folding a log into the current plan: a parsed list, an iterator, a file's end."""

from __future__ import annotations

import gc
import json
import os
import shutil
import statistics
import tempfile
import time
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from report import Row, fmt_ns, fmt_rate, skipped
from timing import batched, interleaved, median_seconds
from workloads import write_event

from dsh_tool_todo import replay

REPLAY_TARGET = 2_000_000  # events per second, verify=False
FLAT_TARGET = 2.0  # the tail read on the largest log, over its time on the smallest
# read_events holds the whole log in memory (about 8x its size on disk) and
# takes most of a minute a gigabyte: past this many seconds the full replay is left out
REPLAY_BUDGET_S = 30.0
# parsed events take about 6 KB each in memory (a write of 5 to 20 items): a million would
# take some 6 GB, which no host holds, so the in-memory rows stop at 100,000
PARSED_MAX = 10**5
_DISTINCT = 64  # distinct plans in a generated log; the fold never copies them
_TURN_EVERY = 16  # a turn/start after every so many writes, as a real session has


def events(count: int) -> list[dict[str, Any]]:
    """``count`` events sharing 64 plan objects: only for writing logs quickly."""
    plans = [write_event(5 + variant % 16, variant) for variant in range(_DISTINCT)]
    turn = {"type": "turn/start", "data": {}}
    return [
        turn if index % _TURN_EVERY == _TURN_EVERY - 1 else plans[index % _DISTINCT]
        for index in range(count)
    ]


def parsed_events(directory: Path, count: int) -> list[dict[str, Any]]:
    """``count`` events as a host holds them: written to a log, then parsed back, each its own
    objects (shared dicts would sit in the caches and flatter every fold)."""
    from dsh_tool_todo.stores.jsonl import read_events

    path = directory / f"replay-{count}.jsonl"
    suffixes = [_suffix(event) for event in events(_DISTINCT * _TURN_EVERY)]
    with open(path, "wb") as file:
        for start in range(0, count, len(suffixes)):
            chunk = suffixes[: min(len(suffixes), count - start)]
            file.write(
                b"".join(b'{"seq":%d%s' % (start + at, tail) for at, tail in enumerate(chunk))
            )
    try:
        return read_events(path)
    finally:
        path.unlink()


def bare_fold(log: Iterable[dict[str, Any]]) -> object:
    """The least any fold must do: look at each event's type, keep the latest plan."""
    plan = None
    for event in log:
        kind = event["type"]
        if kind == "todo/write":
            plan = event["data"]["todos"]
        elif kind == "turn/start":
            plan = None
    return plan


def bare_fold_from_end(log: list[dict[str, Any]]) -> object:
    """The least a read from the end must do: step back to the deciding event."""
    for index in range(len(log) - 1, -1, -1):
        kind = log[index]["type"]
        if kind == "todo/write":
            return log[index]["data"]["todos"]
        if kind == "turn/start":
            return None
    return None


def memory_rows(largest: int) -> list[Row]:
    """``replay(events, verify=False)`` on parsed events: from the end, and the whole fold."""
    directory = Path(tempfile.mkdtemp(prefix="dsh-todo-replay-"))
    try:
        return _memory_rows(directory, largest)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _memory_rows(directory: Path, largest: int) -> list[Row]:
    largest = min(largest, PARSED_MAX)
    tail_rows: list[Row] = []
    fold_rows: list[Row] = []
    first_tail: float | None = None
    count = 1000
    while count <= largest:
        log = parsed_events(directory, count)
        assert replay(log, verify=False) is bare_fold(log) is replay(iter(log), verify=False)
        seconds = 0.4 if count < 10**6 else 1.5

        def from_end(log: list[dict[str, Any]] = log) -> object:
            return replay(log, verify=False)

        def whole(log: list[dict[str, Any]] = log) -> object:
            return replay(iter(log), verify=False)

        def bare(log: list[dict[str, Any]] = log) -> object:
            return bare_fold(log)

        def bare_end(log: list[dict[str, Any]] = log) -> object:
            return bare_fold_from_end(log)

        # apart: a batch of whole folds would leave the tail read a cold cache to work in
        tail = interleaved(
            {"end": batched(from_end), "bare": batched(bare_end)},
            reference="bare",
            seconds=seconds / 2,
        )
        result = interleaved(
            {"whole": batched(whole), "bare": batched(bare)},
            reference="bare",
            seconds=seconds,
            batch_ns=20_000_000,
            min_rounds=3,
        )
        ns = result.per_call_ns
        end_ns = tail.per_call_ns["end"]
        first_tail = end_ns if first_tail is None else first_tail
        is_last = count * 10 > largest
        flat = end_ns / first_tail
        tail_rows.append(
            Row(
                "4 replay of a list",
                f"{count:,} parsed events",
                f"from the end {fmt_ns(end_ns)}",
                f"bare loop from the end {fmt_ns(tail.per_call_ns['bare'])}",
                tail.ratio("end", "bare").median,
                "≤2x the 1,000-event time" if is_last else "flat",
                flat <= FLAT_TARGET if is_last else None,
                note=f"{flat:.2f}x the 1,000-event time; whole fold {fmt_ns(ns['whole'])}",
                numbers={"ns": end_ns, "whole_ns": ns["whole"], "vs_smallest": flat},
            )
        )
        rate = count / (ns["whole"] / 1e9)
        ratio = result.ratio("whole", "bare")
        fold_rows.append(
            Row(
                "4 replay of an iterator",
                f"{count:,} parsed events",
                f"{fmt_rate(rate)} ({fmt_ns(ns['whole'])})",
                f"bare loop {fmt_rate(count / (ns['bare'] / 1e9))}",
                ratio.median,
                f"≥{REPLAY_TARGET / 1e6:g} M events/s",
                rate >= REPLAY_TARGET,
                note=f"ratio = replay time / bare loop time; middle half {ratio.text()}",
                numbers={"events_per_s": rate, "ns": ns["whole"], "ref_ns": ns["bare"]},
            )
        )
        count *= 10
    return [*tail_rows, *fold_rows, *_verified_rows(directory, largest), _load_row(directory)]


def _verified_rows(directory: Path, largest: int) -> list[Row]:
    """``verify=True`` checks every write as the tool would: for information."""
    count = min(10**4, largest)
    log = parsed_events(directory, count)

    def checked_fold() -> object:
        return replay(log, verify=True)

    def unchecked_fold() -> object:
        return replay(iter(log), verify=False)

    checked = median_seconds(checked_fold, repeats=5)
    unchecked = median_seconds(unchecked_fold, repeats=5)
    return [
        Row(
            "4 replay, verify=True",
            f"{count:,} parsed events",
            f"{fmt_rate(count / checked)} ({fmt_ns(checked * 1e9)})",
            f"whole fold, verify=False {fmt_rate(count / unchecked)}",
            checked / unchecked,
            "info",
            note="ratio = verified time / unverified time",
            numbers={"events_per_s": count / checked, "seconds": checked},
        )
    ]


def _load_row(directory: Path, megabytes: int = 10) -> Row:
    """``read_events`` of a log, with the collector on as a host runs it."""
    from dsh_tool_todo.stores.jsonl import read_events

    path = directory / "load.jsonl"
    count = write_log(path, megabytes * 2**20)

    def bare_load() -> object:
        with open(path, "rb") as file:
            return [json.loads(line) for line in file]

    def timed(call: Callable[[], object], *, collector: bool) -> float:
        gc.collect()
        if not collector:
            gc.disable()
        try:
            start = time.perf_counter()
            kept = call()
            elapsed = time.perf_counter() - start
            del kept  # freed after the clock stopped
            return elapsed
        finally:
            gc.enable()

    sides: dict[str, tuple[Callable[[], object], bool]] = {
        "ours": (lambda: read_events(path), True),
        "bare": (bare_load, True),
        "ours_off": (lambda: read_events(path), False),
    }
    samples: dict[str, list[float]] = {name: [] for name in sides}
    try:
        for round_ in range(7):  # interleaved, the first side rotating
            names = list(sides)[round_ % 3 :] + list(sides)[: round_ % 3]
            for name in names:
                call, collector = sides[name]
                samples[name].append(timed(call, collector=collector))
    finally:
        path.unlink()
    ours, bare, ours_off = (statistics.median(samples[name]) for name in sides)
    size = megabytes * 2**20
    return Row(
        "4 load a log",
        f"{megabytes} MB, {count:,} events",
        f"read_events {fmt_ns(ours * 1e9)}",
        f"json.loads per line {fmt_ns(bare * 1e9)}",
        ours / bare,
        "info",
        note=f"collector on, as hosts run it ({fmt_ns(ours_off * 1e9)} with it off); "
        f"{size / ours / 2**20:.0f} MB/s",
        numbers={"seconds": ours, "bare_seconds": bare, "collector_off_seconds": ours_off},
    )


# --- the tail read on files --------------------------------------------------------------


def _suffix(event: dict[str, Any]) -> bytes:
    # the bytes JsonlSession writes after the seq: compact, ASCII-only JSON, one event a line
    body = json.dumps({"type": event["type"], "data": event["data"]}, separators=(",", ":"))
    return ("," + body[1:] + "\n").encode("ascii")


def write_log(path: Path, size_bytes: int) -> int:
    """A valid session log of about ``size_bytes``, written in large chunks; its event count.

    Each event is encoded once; only the seq changes from line to line, so a
    gigabyte is written in seconds.
    """
    suffixes = [_suffix(event) for event in events(_DISTINCT * _TURN_EVERY)]
    seq = 0
    written = 0
    with open(path, "wb") as file:
        while written < size_bytes:
            chunk = b"".join(
                b'{"seq":%d%s' % (seq + offset, suffix) for offset, suffix in enumerate(suffixes)
            )
            seq += len(suffixes)
            file.write(chunk)
            written += len(chunk)
        # end on a write, so the tail read has to parse and check one plan
        file.write(b'{"seq":%d%s' % (seq, suffixes[0]))
    return seq + 1


def _fits_in_memory(size: int) -> bool:
    """Whether ``read_events`` can hold the whole log (about 8x its size) in half the free RAM."""
    try:
        meminfo = Path("/proc/meminfo").read_text(encoding="ascii").splitlines()
    except OSError:
        return True
    available = next((line for line in meminfo if line.startswith("MemAvailable:")), None)
    return available is None or 8 * size <= int(available.split()[1]) * 1024 // 2


def _full_replay(path: Path) -> object:
    from dsh_tool_todo.stores.jsonl import read_events

    return replay(read_events(path))


@dataclass
class _Sizes:
    """What the earlier, smaller logs taught: the first tail time, the replay's speed."""

    first_mb: int
    first_tail_s: float | None = None
    replay_bytes_per_s: float | None = None


def log_rows(sizes_mb: tuple[int, ...]) -> list[Row]:
    try:
        from dsh_tool_todo.stores.jsonl import current_plan  # noqa: F401
    except ImportError:
        return [
            skipped("4 tail read", f"{mb} MB", "no dsh_tool_todo.stores.jsonl") for mb in sizes_mb
        ]
    directory = Path(tempfile.mkdtemp(prefix="dsh-todo-bench-"))
    learned = _Sizes(first_mb=sizes_mb[0])
    try:
        rows = []
        for mb in sizes_mb:
            free = shutil.disk_usage(directory).free
            if free < 3 * mb * 2**20:
                rows.append(skipped("4 tail read", f"{mb} MB", f"only {free >> 20} MB free"))
                continue
            is_last = mb == sizes_mb[-1] and len(sizes_mb) > 1
            rows.append(_log_row(directory / f"log-{mb}.jsonl", mb, learned, is_last=is_last))
        rows.append(_after_plan_row(directory / "after-plan.jsonl"))
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return rows


def _log_row(path: Path, mb: int, learned: _Sizes, *, is_last: bool) -> Row:
    from dsh_tool_todo.stores.jsonl import current_plan

    start = time.perf_counter()
    count = write_log(path, mb * 2**20)
    written_in = time.perf_counter() - start
    size = os.path.getsize(path)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a generated log must read back clean
            tail = median_seconds(lambda: current_plan(path), repeats=21)
            rate = learned.replay_bytes_per_s
            projected = None if rate is None else size / rate
            full: float | None = None
            in_budget = projected is None or projected <= REPLAY_BUDGET_S
            if in_budget and _fits_in_memory(size):
                start = time.perf_counter()
                replayed = _full_replay(path)
                full = time.perf_counter() - start
                learned.replay_bytes_per_s = size / full
                assert current_plan(path) == replayed
    finally:
        path.unlink()
    if learned.first_tail_s is None:
        learned.first_tail_s = tail
    flat = tail / learned.first_tail_s
    notes = [
        "ratio = replay time / tail-read time",
        f"tail {flat:.2f}x the {learned.first_mb} MB time",
        f"{count:,} events written in {written_in:.1f} s",
    ]
    if full is None and projected is not None and projected > REPLAY_BUDGET_S:
        notes.append(f"full replay skipped: it would take about {projected:.0f} s")
    elif full is None:
        notes.append("full replay skipped: the events would not fit in free memory")
    return Row(
        "4 tail read vs replay",
        f"{mb} MB log",
        f"current_plan {fmt_ns(tail * 1e9)}",
        "replay(read_events) " + ("skipped" if full is None else fmt_ns(full * 1e9)),
        None if full is None else full / tail,
        f"tail ≤{FLAT_TARGET:g}x the {learned.first_mb} MB time" if is_last else "flat",
        flat <= FLAT_TARGET if is_last else None,
        note="; ".join(notes),
        numbers={
            "bytes": size,
            "events": count,
            "tail_s": tail,
            "replay_s": full,
            "tail_vs_smallest": flat,
        },
    )


def _other_event(index: int) -> dict[str, Any]:
    """An event a host logs between plans: a model message, newlines and accents escaped."""
    text = f"Step {index}: reading the parser.\nIt handles the café's menu – 3 cases.\n" * 6
    return {"role": "assistant", "text": text}


def _after_plan_row(path: Path, megabytes: int = 1) -> Row:
    """``current_plan`` when the latest plan has ``megabytes`` of other events after it.

    Every line after the plan must still be checked, as a full replay would; the
    reference parses each of them with ``json.loads`` and does nothing else.
    """
    from dsh_tool_todo.stores.jsonl import JsonlSession, current_plan

    with JsonlSession(path) as session:
        session.append("todo/write", {"todos": [{"content": "Plan", "status": "in_progress"}]})
        index = 0
        while path.stat().st_size < megabytes * 2**20:
            session.append("message", _other_event(index))
            index += 1
    lines = path.read_bytes().splitlines()[1:]
    assert current_plan(path) == [{"content": "Plan", "status": "in_progress"}]

    def bare() -> object:
        return [json.loads(line) for line in lines]

    result = interleaved(
        {"ours": batched(lambda: current_plan(path)), "bare": batched(bare)},
        reference="bare",
        seconds=2.0,
        batch_ns=20_000_000,
        min_rounds=9,
    )
    ns = result.per_call_ns
    ratio = result.ratio("ours", "bare")
    path.unlink()
    return Row(
        "4 tail read, plan far back",
        f"{megabytes} MiB ({index:,} events) after the plan",
        f"current_plan {fmt_ns(ns['ours'])}",
        f"json.loads of those lines {fmt_ns(ns['bare'])}",
        ratio.median,
        "info",
        note=f"middle half {ratio.text()}; every line after the plan is checked",
        numbers=result.numbers("ours", "bare"),
    )
