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

What the client cannot see: when the engine received a request (a busy server's front end
forwards it late, and two requests sent together may reach the scheduler in either order),
and a step whose chunks the front end delivered late, together with the next step's (vLLM's
KV events show both). The timeline is an estimate; against a real vLLM
(`bench/vllm/fidelity.py`), taking each request as scheduled at the burst before its first
chunk, however its stream came, predicted best.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from pcache.replayer.endpoint.client import RequestTiming

STEP_GAP_MS = 3.0
"""Chunks closer than this are one step's end; steps are a forward pass apart (a prefill or a
decode step of the smallest models takes several ms)."""


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


def step_ends(times: Sequence[float], gap_ms: float = STEP_GAP_MS) -> list[float]:
    """The start of each burst of `times` (sorted or not): the step ends."""
    ends: list[float] = []
    last = None
    for time in sorted(times):
        if last is None or time - last > gap_ms:
            ends.append(time)
        last = time
    return ends


def scheduled(
    timings: Sequence[RequestTiming], gap_ms: float = STEP_GAP_MS
) -> dict[int, tuple[float, float, float]]:
    """Each completed request's (admitted, first token, freed) in ms, by its index."""
    chunks = {timing.index: chunk_times(timing) for timing in timings if timing.ok}
    ends = step_ends([time for times in chunks.values() for time in times], gap_ms)
    placed = {}
    for timing in timings:
        times = chunks.get(timing.index)
        if not times:
            continue
        sent = timing.start_s * 1000.0
        first = max(ends[bisect.bisect_right(ends, min(times)) - 1], sent)
        last = ends[bisect.bisect_right(ends, max(times)) - 1]
        before = bisect.bisect_left(ends, first) - 1
        admitted = max(sent, ends[before]) if before >= 0 else sent
        admitted = min(admitted, first)
        placed[timing.index] = (admitted, first, max(last, first))
    return placed
