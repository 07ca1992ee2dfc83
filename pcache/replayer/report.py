"""`ReplayReport`: what a replay found, whichever driver produced it.

Every driver (the simulator, the engine, a live endpoint) fills the same fields: the cache's
statistics over the trace (hit rates, evictions, peak blocks, prefill tokens saved) and the
TTFT distributions with and without caching. A simulated replay predicts the TTFTs from the
`TtftModel`; a measuring driver adds a `Measurement` (the runs it timed, the speedup, and how
far the simulator's prediction for the same trace and capacity is from what it measured).
A live endpoint adds its `EndpointMeasurement` (`pcache.replayer.endpoint.report`: the server's
latencies, cached tokens and metrics, with `vllm bench serve`'s key names) as `endpoint`.
`to_dict` is the `--format json` document; `RequestOutcome.to_dict` is one `--output` line.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields
from itertools import accumulate
from typing import Any

from pcache.replayer.calibration_used import CalibrationUsed
from pcache.replayer.ttft import TtftModel

MODES = ("simulate", "engine", "endpoint")


@dataclass(slots=True)
class RequestOutcome:
    """One request's result (a line of `--output per_request.jsonl`)."""

    index: int
    line: int | None
    timestamp_ms: float
    prompt_tokens: int
    cached_tokens: int
    ttft_ms: float
    ttft_uncached_ms: float
    start_ms: float
    observed_cached_tokens: int | None = None
    predicted_cached_tokens: int | None = None
    """Measuring drivers: the simulator's cached tokens for this request (same trace, pool)."""
    output_token_ids: list[int] | None = None
    miss_reasons: Any = None
    """`pcache.replayer.miss_reasons.MissReasons`: why its missed tokens were missed (replays
    that explain their misses), or its JSON form where a per-request file was read back."""

    def to_dict(self) -> dict[str, Any]:
        data = {"request": self.index}
        data.update((item.name, getattr(self, item.name)) for item in fields(self))
        reasons = self.miss_reasons
        if self.predicted_cached_tokens is None:  # a simulated replay: nothing measured
            del data["predicted_cached_tokens"], data["output_token_ids"]
        if reasons is None:
            del data["miss_reasons"]
        else:
            data["miss_reasons"] = reasons if isinstance(reasons, dict) else reasons.to_dict()
        return data


@dataclass(slots=True)
class Bill:
    """Input cost with and without prompt caching (provider profiles)."""

    price_per_mtok: float
    cached_read_multiplier: float
    cache_write_multiplier: float
    cost_without_cache: float
    cost_with_cache: float
    saved_fraction: float
    min_tokens_by_model: dict[str, dict[str, Any]] = field(default_factory=dict)
    """The minimum prefix assumed for each model of the log and where it comes from (the
    profile's model table, `models.min_tokens[PREFIX]`, or its `default`); empty when the
    profile has no model table."""


@dataclass(slots=True)
class RunStats:
    """One measured run of the whole trace (cache on or off); medians over `--repeat`."""

    ttft_ms: dict[str, float]
    prefill_tokens_computed: int
    cached_tokens: int
    wall_s: float
    prompt_tokens_per_s: float
    generated_tokens_per_s: float
    generated_tokens: int
    peak_used_blocks: int
    ttft_ms_runs: list[float] = field(default_factory=list)
    """The TTFT p50 of each repetition (the spread behind the median)."""


@dataclass(slots=True)
class Cut:
    """What `--limit`, `--max-prompt-tokens` and `--max-output-tokens` removed."""

    requests_dropped: int = 0
    prompt_tokens_dropped: int = 0
    prompts_truncated: int = 0
    output_tokens_dropped: int = 0
    outputs_capped: int = 0


@dataclass(slots=True)
class Measurement:
    """What a measuring driver timed, beside the simulator's prediction for the same trace."""

    driver: str
    machine: str
    model: str
    dtype: str
    backend: str
    device: str
    settings: dict[str, Any]
    run_order: str
    repeat: int
    warmup: str
    cache_on: RunStats
    cache_off: RunStats | None
    speedup_p50: float | None
    speedup_mean: float | None
    outputs_equal: bool | None
    cached_tokens_match: bool
    mismatched_requests: list[int]
    predicted_ttft_ms: dict[str, float]
    predicted_speedup_p50: float | None
    prediction_error_p50: float | None
    """The calibrated prediction of the cache-on TTFT p50 relative to the measured one."""
    calibration: dict[str, Any] | None
    cut: Cut
    stability: Any = None
    """`pcache.replayer.engine.stability.Stability` of an engine measurement: per-pair
    speedups, their spread, the load around the runs and warnings."""


@dataclass(slots=True)
class ReplayReport:
    """What a replay found: the cache over the trace, TTFT with and without caching."""

    source: str
    trace_format: str
    policy: str
    concurrency: str
    block_size: int
    capacity_blocks: int | None
    requests: int
    query_tokens: int
    hit_tokens: int
    token_hit_rate: float
    request_hit_rate: float
    hit_requests: int
    evicted_blocks: int
    peak_used_blocks: int
    kv_bytes_per_token: int
    kv_bytes_saved: int
    """Physical KV memory saved by sharing: at the busiest moment, the blocks in the block
    tables of the running requests minus the distinct blocks they reference (0 in serial
    replays, where one request runs at a time; vllm policy only)."""
    peak_shared_blocks: int
    prefill_kv_bytes_reused: int
    """KV bytes read from the cache instead of recomputed, over the whole replay."""
    prefill_tokens_saved: int
    skipped_lines: int
    reordered: bool
    ttft_ms: dict[str, float]
    ttft_uncached_ms: dict[str, float]
    bill: Bill | None = None
    observed_cached_tokens: int | None = None
    mode: str = "simulate"
    ttft_model: TtftModel | None = None
    """The TTFT model behind predicted figures (defaults, flags or a calibration file)."""
    calibration: CalibrationUsed | None = None
    """The calibration file `ttft_model` was read from (`--simulate --calibration`); an
    engine replay's JSON holds its own fit under this key instead."""
    measurement: Measurement | None = None
    endpoint: Any = None
    """`--endpoint`: the `EndpointMeasurement` of the live server."""
    per_request: list[RequestOutcome] = field(default_factory=list, repr=False)
    fleet: Any = None
    """`--replicas`: the `FleetSummary` (`pcache.replayer.fleet.report`): router, replicas,
    load imbalance and router precision; its fields sit at the top level of the JSON."""
    miss_reasons: dict[str, int] | None = None
    """Missed tokens by reason (`pcache.replayer.miss_reasons.REASONS`), summed over the
    requests; None when the replay did not explain its misses."""

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("per_request")
        data.pop("endpoint")
        data.pop("fleet")
        if self.fleet is not None:
            data.update(self.fleet.to_dict())
        measurement = data.pop("measurement")
        if measurement is not None:  # its fields sit at the top level of the JSON
            data.update(measurement)
        if self.endpoint is not None:  # so do the endpoint's, with vllm bench serve's names
            data.update(self.endpoint.to_dict())
        return data


def distribution(counts: Mapping[float, int]) -> dict[str, float]:
    """Mean and nearest-rank percentiles of values given as value -> number of requests."""
    ordered = sorted(counts.items())
    total = sum(counts.values())
    mean = math.fsum(value * count for value, count in ordered) / total if total else 0.0
    summary = {"mean": round(mean, 3)}
    seen = list(accumulate(count for _, count in ordered))  # requests up to each value
    for name, fraction in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99)):
        rank = min(max(int(-(-fraction * total // 1)), 1), total)  # as ttft.percentile
        index = bisect_left(seen, rank)  # the first value with `rank` requests up to it
        summary[name] = round(ordered[index][0] if index < len(ordered) else 0.0, 3)
    return summary


def distribution_of(values: Iterable[float]) -> dict[str, float]:
    from collections import Counter

    return distribution(Counter(values))
