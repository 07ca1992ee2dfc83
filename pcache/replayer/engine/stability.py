"""How much a `replay --engine` measurement can be trusted on a machine others share.

A pair is one request's cache-on and cache-off runs (serial), or one repetition's two whole
runs (timed). The load is read before, between and after the two runs of a pair; a pair whose
readings differ (another process started or stopped running meanwhile) straddled a load
change, and is measured again, at most `MAX_PAIR_REPEATS` times per pair and as many times in
all as there are pairs. The report gives the per-pair speedups (cache-off TTFT over
cache-on TTFT) of the pairs whose cache-on run hit the cache (a miss has nothing to speed
up; mixing the two would read as spread) as a median and interquartile range, the load
average before and after, and warnings when the figures are not to be trusted.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from pcache.process.machine import LoadReading

MAX_PAIR_REPEATS = 2
"""Times one pair is measured again when its runs straddled a load change."""
MAX_RELATIVE_IQR = 0.25
"""Per-pair speedups spread wider than this fraction of their median: a warning."""
MAX_LOAD_CHANGE = 1.0
"""A 1-minute load average that moved more than this during the measurement: a warning."""
MAX_UNSETTLED_FRACTION = 0.1
"""More pairs than this still straddling a load change after their repeats: a warning."""


LOAD_CHANGE_FRACTION = 0.25
"""Other processes' running tasks changed by at least one and by this fraction of the
largest reading: a load change (on a machine already running ten tasks, eleven is none)."""


def straddles(readings: list[LoadReading]) -> bool:
    """True when other processes' running tasks changed between the readings of one pair."""
    counts = [reading.others_running for reading in readings]
    change = max(counts) - min(counts)
    return change >= max(1, LOAD_CHANGE_FRACTION * max(counts))


@dataclass(slots=True)
class RepeatBudget:
    """Repeats left for the whole measurement (one per pair)."""

    left: int
    used: int = 0

    def take(self, attempts: int) -> bool:
        """True (and one repeat spent) when a pair measured `attempts` times may go again."""
        if attempts > MAX_PAIR_REPEATS or self.left <= 0:
            return False
        self.left -= 1
        self.used += 1
        return True


@dataclass(slots=True)
class PairLog:
    """What the pairs of a measurement saw."""

    speedups: list[float] = field(default_factory=list)
    """Of the pairs whose cache-on run hit the cache."""
    pairs: int = 0
    repeated_pairs: int = 0
    unsettled_pairs: int = 0
    """Pairs whose last measurement still straddled a load change."""

    def add(self, off_ms: float, on_ms: float, hit: bool, attempts: int, settled: bool) -> None:
        self.pairs += 1
        if hit and on_ms > 0:
            self.speedups.append(off_ms / on_ms)
        self.repeated_pairs += attempts > 1
        self.unsettled_pairs += not settled


@dataclass(frozen=True, slots=True)
class Stability:
    """The per-pair spread of the speedup and the machine's load around the measurement."""

    threads: int
    pairs: int
    hit_pairs: int
    """Pairs whose cache-on run hit the cache: the ones the per-pair speedups are of."""
    pair_speedup_p25: float | None
    pair_speedup_p50: float | None
    pair_speedup_p75: float | None
    relative_iqr: float | None
    """(p75 - p25) / p50 of the per-pair speedups."""
    repeated_pairs: int
    repeats: int
    unsettled_pairs: int
    load_average_before: float
    load_average_after: float
    others_running_before: int
    others_running_after: int
    warnings: list[str]


def stability_of(
    log: PairLog, budget: RepeatBudget, threads: int, before: LoadReading, after: LoadReading
) -> Stability:
    speedups = sorted(log.speedups)
    if speedups:
        q1, median, q3 = (
            statistics.quantiles(speedups, n=4, method="inclusive")
            if len(speedups) > 1
            else (speedups[0],) * 3
        )
        relative = (q3 - q1) / median if median else None
    else:
        q1 = median = q3 = relative = None
    pairs = log.pairs
    warnings = []
    if relative is not None and relative > MAX_RELATIVE_IQR:
        warnings.append(
            f"per-pair speedups spread over {q1:.2f}-{q3:.2f}x (IQR {relative:.0%} of the"
            f" median {median:.2f}x, {len(speedups)} pairs with a cache hit): too wide for the"
            " speedup printed; rerun on a quieter machine or with --repeat (requests that hit"
            " the cache unequally spread too)"
        )
    change = after.average - before.average
    if abs(change) > MAX_LOAD_CHANGE:
        warnings.append(
            f"the load average moved from {before.average:.2f} to {after.average:.2f} during"
            " the measurement: other work on this machine changed the timings"
        )
    if pairs and log.unsettled_pairs > MAX_UNSETTLED_FRACTION * pairs:
        warnings.append(
            f"{log.unsettled_pairs} of {pairs} pairs straddled a load change even after"
            f" {budget.used} repeats: their cache-on and cache-off runs saw different loads"
        )

    def rounded(value: float | None) -> float | None:
        return None if value is None else round(value, 4)

    return Stability(
        threads=threads,
        pairs=pairs,
        hit_pairs=len(speedups),
        pair_speedup_p25=rounded(q1),
        pair_speedup_p50=rounded(median),
        pair_speedup_p75=rounded(q3),
        relative_iqr=rounded(relative),
        repeated_pairs=log.repeated_pairs,
        repeats=budget.used,
        unsettled_pairs=log.unsettled_pairs,
        load_average_before=before.average,
        load_average_after=after.average,
        others_running_before=before.others_running,
        others_running_after=after.others_running,
        warnings=warnings,
    )
