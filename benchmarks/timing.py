"""Paired timing: a contender and its reference, interleaved in rounds, compared by medians.

Interleaving puts both sides under the same noise (other processes on the two
shared cores, frequency changes), and the median of the per-round ratios drops
the rounds that one burst of noise spoiled.
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

Call = Callable[[], object]


@dataclass(frozen=True)
class Paired:
    """Per-call medians in nanoseconds, and the median of the per-round ratios."""

    contender_ns: float
    reference_ns: float
    ratio: float
    rounds: int
    batch: int

    def numbers(
        self, contender: str = "contender_ns", reference: str = "reference_ns"
    ) -> dict[str, float]:
        """The raw figures for the JSON report, under the names that row uses."""
        return {
            contender: self.contender_ns,
            reference: self.reference_ns,
            "rounds": self.rounds,
            "batch": self.batch,
        }


@contextmanager
def quiet_gc() -> Iterator[None]:
    """Collect first, then keep the collector out of the timed region.

    Both sides allocate; a collection landing in one side's batch would charge
    it for garbage the other side made.
    """
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _batch_ns(call: Call, batch: int) -> int:
    start = time.perf_counter_ns()
    for _ in range(batch):
        call()
    return time.perf_counter_ns() - start


def _calibrate(call: Call, target_ns: int) -> int:
    """The batch size that makes one batch last about ``target_ns``."""
    batch = 1
    while True:
        elapsed = _batch_ns(call, batch)
        if elapsed >= target_ns // 4 or batch >= 1 << 20:
            return max(1, round(batch * target_ns / max(elapsed, 1)))
        batch *= 2


def paired(
    contender: Call,
    reference: Call,
    *,
    seconds: float,
    batch_ns: int = 2_000_000,
    reset: Call | None = None,
    min_rounds: int = 7,
) -> Paired:
    """Time ``contender`` against ``reference`` for about ``seconds`` of wall time.

    ``reset`` runs between batches, untimed (e.g. to empty a session that the
    contender keeps appending to).
    """
    for _ in range(3):  # warm-up: caches, lazily built validators, branch predictors
        _batch_ns(contender, 50)
        _batch_ns(reference, 50)
        if reset is not None:
            reset()
    batch = min(_calibrate(contender, batch_ns), _calibrate(reference, batch_ns))
    if reset is not None:
        reset()
    contender_samples: list[float] = []
    reference_samples: list[float] = []
    ratios: list[float] = []
    deadline = time.perf_counter() + seconds
    rounds = 0
    with quiet_gc():
        while rounds < min_rounds or time.perf_counter() < deadline:
            # alternate which side goes first, so neither always runs on a warmer cache
            if rounds % 2:
                ref = _batch_ns(reference, batch)
                con = _batch_ns(contender, batch)
            else:
                con = _batch_ns(contender, batch)
                ref = _batch_ns(reference, batch)
            if reset is not None:
                reset()
            contender_samples.append(con / batch)
            reference_samples.append(ref / batch)
            ratios.append(con / ref)
            rounds += 1
    return Paired(
        contender_ns=statistics.median(contender_samples),
        reference_ns=statistics.median(reference_samples),
        ratio=statistics.median(ratios),
        rounds=rounds,
        batch=batch,
    )


def median_seconds(call: Call, *, repeats: int, reset: Call | None = None) -> float:
    """The median wall time of ``call`` over ``repeats`` runs (for long, single operations)."""
    samples: list[float] = []
    with quiet_gc():
        for _ in range(repeats):
            start = time.perf_counter_ns()
            call()
            samples.append((time.perf_counter_ns() - start) / 1e9)
            if reset is not None:
                reset()
    return statistics.median(samples)
