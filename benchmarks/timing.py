"""Interleaved timing: contenders and their reference in rounds, compared by medians.

Interleaving puts every side under the same noise (other processes on the two
shared cores, frequency changes), and the median of the per-round ratios drops
the rounds that one burst of noise spoiled. The spread reported beside a ratio
is the middle half of the per-round ratios (25th to 75th percentile).

A *side* is a function that runs a call ``n`` times and returns the nanoseconds
it timed: :func:`batched` times the whole batch, :func:`cold` times each call
alone after disturbing the caches, :func:`threaded` runs the batch on two
threads at once.
"""

from __future__ import annotations

import gc
import statistics
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field

Call = Callable[[], object]
Side = Callable[[int], float]  # runs n calls; returns the timed nanoseconds per call


@dataclass(frozen=True)
class Spread:
    """The median of per-round ratios and the middle half of them."""

    median: float
    low: float
    high: float

    def text(self) -> str:
        return f"{self.low:.2f}-{self.high:.2f}x"


def spread(values: list[float]) -> Spread:
    if len(values) < 2:
        return Spread(values[0], values[0], values[0])
    low, _, high = statistics.quantiles(values, n=4)
    return Spread(statistics.median(values), low, high)


@dataclass(frozen=True)
class Paired:
    """Per-call medians in nanoseconds, and the median of the per-round ratios."""

    contender_ns: float
    reference_ns: float
    ratio: float
    rounds: int
    batch: int
    ratio_low: float = 0.0
    ratio_high: float = 0.0

    def numbers(
        self, contender: str = "contender_ns", reference: str = "reference_ns"
    ) -> dict[str, float]:
        """The raw figures for the JSON report, under the names that row uses."""
        return {
            contender: self.contender_ns,
            reference: self.reference_ns,
            "rounds": self.rounds,
            "batch": self.batch,
            "ratio_p25": self.ratio_low,
            "ratio_p75": self.ratio_high,
        }

    @property
    def spread(self) -> str:
        return f"{self.ratio_low:.2f}-{self.ratio_high:.2f}x"


@dataclass(frozen=True)
class Interleaved:
    """Each side's median time per call, and its per-round ratios to the reference."""

    per_call_ns: dict[str, float]
    ratios: dict[str, Spread]
    rounds: int
    batch: int
    samples: dict[str, list[float]] = field(repr=False, default_factory=dict)

    def ratio(self, name: str, over: str) -> Spread:
        """The per-round ratios of side ``name`` to side ``over``."""
        pairs = zip(self.samples[name], self.samples[over], strict=True)
        return spread([mine / theirs for mine, theirs in pairs])

    def numbers(self, name: str, reference: str) -> dict[str, float]:
        ratio = self.ratio(name, reference)
        return {
            "ns": self.per_call_ns[name],
            "reference_ns": self.per_call_ns[reference],
            "ratio": ratio.median,
            "ratio_p25": ratio.low,
            "ratio_p75": ratio.high,
            "rounds": self.rounds,
            "batch": self.batch,
        }


@contextmanager
def quiet_gc() -> Iterator[None]:
    """Collect first, then keep the collector out of the timed region.

    Every side allocates; a collection landing in one side's batch would charge
    it for garbage another side made.
    """
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def batched(call: Call) -> Side:
    """Time ``n`` calls back to back, as one batch."""

    def side(n: int) -> float:
        start = time.perf_counter_ns()
        for _ in range(n):
            call()
        return (time.perf_counter_ns() - start) / n

    return side


def cold(call: Call, disturb: Call) -> Side:
    """Time each call alone, right after ``disturb`` (untimed) has trashed the caches."""

    def side(n: int) -> float:
        total = 0
        for _ in range(n):
            disturb()
            start = time.perf_counter_ns()
            call()
            total += time.perf_counter_ns() - start
        return total / n

    return side


def cache_walker(megabytes: int = 32) -> Call:
    """A walk over a buffer larger than the caches, as a model turn's other work would do."""
    buffer = bytes(megabytes << 20)

    def walk() -> object:
        return buffer.find(b"\x01")  # reads every byte; there is none to find

    return walk


def threaded(first: Call, second: Call) -> Side:
    """Two threads making ``n`` calls each at once; the wall time per call made."""

    def side(n: int) -> float:
        barrier = threading.Barrier(3)

        def work(call: Call) -> None:
            barrier.wait()
            for _ in range(n):
                call()

        threads = [threading.Thread(target=work, args=(call,)) for call in (first, second)]
        for thread in threads:
            thread.start()
        barrier.wait()
        start = time.perf_counter_ns()
        for thread in threads:
            thread.join()
        return (time.perf_counter_ns() - start) / (2 * n)

    return side


def _calibrate(side: Side, target_ns: int) -> int:
    """The batch size that makes one batch of ``side`` last about ``target_ns``."""
    batch = 1
    while True:
        per_call = side(batch)
        if per_call * batch >= target_ns // 4 or batch >= 1 << 20:
            return max(1, round(target_ns / max(per_call, 1.0)))
        batch *= 2


def interleaved(
    sides: Mapping[str, Side],
    *,
    reference: str,
    seconds: float,
    batch_ns: int = 2_000_000,
    batch: int | None = None,
    reset: Call | None = None,
    min_rounds: int = 7,
    warmup: int = 50,
) -> Interleaved:
    """Run every side in rounds for about ``seconds``; the first side of a round rotates.

    ``batch`` fixes the calls per side per round (else calibrated so the fastest
    side's batch lasts ``batch_ns``). ``reset`` runs after each side's batch,
    untimed (e.g. to empty a session the calls keep appending to).
    """
    names = list(sides)
    for _ in range(3):  # warm-up: caches, lazily built validators, branch predictors
        for name in names:
            sides[name](warmup)
            if reset is not None:
                reset()
    if batch is None:
        batch = min(_calibrate(side, batch_ns) for side in sides.values())
        if reset is not None:
            reset()
    samples: dict[str, list[float]] = {name: [] for name in names}
    ratios: dict[str, list[float]] = {name: [] for name in names}
    deadline = time.perf_counter() + seconds
    rounds = 0
    with quiet_gc():
        while rounds < min_rounds or time.perf_counter() < deadline:
            # rotate who goes first, so no side always runs on a warmer (or colder) cache
            order = names[rounds % len(names) :] + names[: rounds % len(names)]
            this_round = {}
            for name in order:
                this_round[name] = sides[name](batch)
                if reset is not None:
                    reset()
            for name in names:
                samples[name].append(this_round[name])
                ratios[name].append(this_round[name] / this_round[reference])
            rounds += 1
    return Interleaved(
        per_call_ns={name: statistics.median(values) for name, values in samples.items()},
        ratios={name: spread(values) for name, values in ratios.items()},
        rounds=rounds,
        batch=batch,
        samples=samples,
    )


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
    result = interleaved(
        {"contender": batched(contender), "reference": batched(reference)},
        reference="reference",
        seconds=seconds,
        batch_ns=batch_ns,
        reset=reset,
        min_rounds=min_rounds,
    )
    ratio = result.ratios["contender"]
    return Paired(
        contender_ns=result.per_call_ns["contender"],
        reference_ns=result.per_call_ns["reference"],
        ratio=ratio.median,
        rounds=result.rounds,
        batch=result.batch,
        ratio_low=ratio.low,
        ratio_high=ratio.high,
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
