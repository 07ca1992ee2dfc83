"""A server's scheduler steps as a client sees them, and each request's place in them.

An engine such as vLLM runs in steps: at the start of a step it frees the requests that
finished in the one before and schedules waiting ones, first come first served; at its end it
emits a token for every request that ran. A client sees each step's end as a burst of stream
chunks, one per request, within a fraction of a millisecond of each other, and the bursts are
a forward pass apart. So, from the run's own send and chunk times:

- the step ends are the chunk times clustered: a chunk within `STEP_GAP_MS` of the previous
  one belongs to the same burst, whose time is its first chunk's;
- a request was scheduled at the burst before its first chunk (the step that produced the
  first token started there), or when it was sent if that is later (the engine was idle);
- it was freed at the burst of its last chunk.

A stream whose tokens came in fewer chunks than it has tokens, or in chunks closer than steps
can be (their median gap under `STEP_GAP_MS`), was held back on its way (a busy server sends
what piled up at once): its first chunk says nothing of when its prefill ran, so that request
is taken as scheduled when it was sent.

`SCHEDULED`: each completed request's (admitted, first token, freed) times in ms.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from pcache.replayer.endpoint.client import RequestTiming

STEP_GAP_MS = 1.5
"""Chunks closer than this are one step's end; steps are a forward pass apart (a prefill or a
decode step of the smallest models takes several ms)."""
BURST_SHARE = 0.4
"""Chunks closer than this share of the run's shortest step are one step's end."""


def chunk_times(timing: RequestTiming) -> list[float]:
    """A completed request's stream chunks, in ms from the start of the pass: the first one
    (of any kind), the first content, each later content chunk (by its inter-token gaps) and
    the end."""
    start = timing.start_s
    times = []
    if timing.first_chunk_s is not None:
        times.append(start + timing.first_chunk_s)
    if timing.ttft_s is not None:
        at = start + timing.ttft_s
        times.append(at)
        for gap in timing.itl_s:
            at += gap
            times.append(at)
    if timing.latency_s is not None:
        times.append(start + timing.latency_s)
    return [time * 1000.0 for time in times]


def held(timing: RequestTiming) -> bool:
    """Its tokens came in fewer content chunks than it has tokens, or closer together than
    steps can be."""
    tokens = timing.completion_tokens or 0
    if tokens <= 1:
        return False
    gaps = sorted(timing.itl_s)
    return len(gaps) + 1 < tokens or gaps[len(gaps) // 2] * 1000.0 < STEP_GAP_MS


def step_ends(times: Sequence[float], gap_ms: float = STEP_GAP_MS) -> list[float]:
    """The start of each burst of `times` (sorted or not): the step ends."""
    ends: list[float] = []
    last = None
    for time in sorted(times):
        if last is None or time - last > gap_ms:
            ends.append(time)
        last = time
    return ends


def shortest_step_ms(timings: Sequence[RequestTiming]) -> float | None:
    """The shortest step the run shows, as an upper bound: no request's first token came
    sooner after its send than one step (its own), nor two of its tokens closer than one
    step apart (the median of its gaps, when its stream was not held back)."""
    steps = []
    for timing in timings:
        if not timing.ok:
            continue
        firsts = [t for t in (timing.first_chunk_s, timing.ttft_s) if t is not None]
        if firsts:
            steps.append(min(firsts) * 1000.0)
        if timing.itl_s and not held(timing):
            steps.append(sorted(timing.itl_s)[len(timing.itl_s) // 2] * 1000.0)
    return min(steps) if steps else None


def burst_gap_ms(timings: Sequence[RequestTiming]) -> float:
    """Chunks closer than this are one step's: `STEP_GAP_MS`, or `BURST_SHARE` of the
    shortest step where that is wider (a client sharing its cores with the server reads one
    step's chunks over several milliseconds)."""
    shortest = shortest_step_ms(timings)
    return max(STEP_GAP_MS, BURST_SHARE * shortest) if shortest is not None else STEP_GAP_MS


def scheduled(
    timings: Sequence[RequestTiming], gap_ms: float | None = None
) -> dict[int, tuple[float, float, float]]:
    """Each completed request's (admitted, first token, freed) in ms, by its index; `gap_ms`:
    the burst gap (default `burst_gap_ms`)."""
    gap_ms = burst_gap_ms(timings) if gap_ms is None else gap_ms
    chunks = {timing.index: chunk_times(timing) for timing in timings if timing.ok}
    ends = step_ends([time for times in chunks.values() for time in times], gap_ms)
    placed = {}
    for timing in timings:
        times = chunks.get(timing.index)
        if not times:
            continue
        sent = timing.start_s * 1000.0
        first = ends[bisect.bisect_right(ends, min(times)) - 1]
        last = ends[bisect.bisect_right(ends, max(times)) - 1]
        before = bisect.bisect_left(ends, first) - 1
        admitted = max(sent, ends[before]) if before >= 0 and not held(timing) else sent
        admitted = min(admitted, first)
        placed[timing.index] = (admitted, first, max(last, first))
    return placed
