"""When each request of an endpoint replay is sent (open loop), as `vllm bench serve` does.

- `timestamps`: the trace's own arrival times, relative to the first, times `time_scale`
  (0.5 replays twice as fast); a trace without timestamps sends everything at once.
- `rate`: a gamma process of `rate` requests/s; `burstiness` 1 is Poisson (exponential
  gaps), below 1 burstier, above 1 more regular (shape `burstiness`, scale
  `1 / (rate * burstiness)`, so the mean gap stays `1 / rate`). Seeded.
- `rate` infinite: everything at once (then `max_concurrency` alone paces the run).
"""

from __future__ import annotations

import math

import numpy as np

from pcache.options.numbers import check_number

MAX_TIME_SCALE = 1000.0
"""The most `time_scale` stretches a trace: far more only turns a replay into a long wait."""


def arrival_offsets(
    timestamps_ms: list[float],
    *,
    rate: float | None = None,
    burstiness: float = 1.0,
    time_scale: float = 1.0,
    seed: int = 0,
) -> list[float]:
    """Seconds after the start at which each request is sent, in trace order."""
    check_number("--burstiness", burstiness, above=0)
    check_number("--time-scale", time_scale, minimum=0, maximum=MAX_TIME_SCALE)
    count = len(timestamps_ms)
    if rate is None:
        if not timestamps_ms:
            return []
        first = timestamps_ms[0]
        return [max(stamp - first, 0.0) / 1000.0 * time_scale for stamp in timestamps_ms]
    if rate == math.inf:
        return [0.0] * count
    check_number("--rate", rate, above=0)
    rng = np.random.default_rng(seed)
    gaps = rng.gamma(burstiness, 1.0 / (rate * burstiness), size=count)
    gaps[0] = 0.0  # the first request goes at once
    return [float(value) for value in np.cumsum(gaps)]
