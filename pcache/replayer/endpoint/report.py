"""What an endpoint replay measured, with `vllm bench serve`'s key names where they mean the
same thing (`median_ttft_ms`, `p99_itl_ms`, `ttfts`, `input_lens`, `errors`, ...) and pcache's
prediction beside the server's counts (`cached_tokens`, `predicted_cached_tokens`).

Per-request lists are in trace order; a request's TTFT is None when it failed or streamed no
content. Percentiles are linear (numpy's default, as vLLM's); TPOT is (latency - TTFT) /
(output tokens - 1) for requests of two tokens or more, as vLLM computes it.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pcache.replayer.endpoint.client import RequestTiming

PERCENTILES = (50, 90, 95, 99)
PREDICTED_FIELDS = (
    "the report's cache statistics (hit_tokens, token_hit_rate, request_hit_rate,"
    " evicted_blocks, peak_used_blocks, prefill_tokens_saved, ...) are the simulator's"
    " prediction for this trace; what the server reported is in cached_tokens,"
    " total_cached_tokens and server_metrics; ttft_ms is the measured TTFT (nearest-rank"
    " percentiles), the *_ms keys use numpy's linear percentiles as vllm bench serve does"
)
METRICS = ("ttft", "first_chunk", "tpot", "itl", "e2el")


@dataclass(frozen=True, slots=True)
class Latency:
    """One metric over the requests, in milliseconds (None when nothing was measured)."""

    mean: float | None = None
    median: float | None = None
    std: float | None = None
    p50: float | None = None
    p90: float | None = None
    p95: float | None = None
    p99: float | None = None

    @classmethod
    def of(cls, values_s: list[float]) -> Latency:
        data = np.asarray(values_s, dtype=float) * 1000.0
        if data.size == 0:
            return cls()
        values = [data.mean(), np.median(data), data.std()]
        values += [np.percentile(data, p) for p in PERCENTILES]
        return cls(*(round(float(value), 3) for value in values))

    def as_dict(self, name: str) -> dict[str, float | None]:
        """With vllm bench serve's keys: `mean_{name}_ms`, ..., `p99_{name}_ms`."""
        keys = [f"mean_{name}_ms", f"median_{name}_ms", f"std_{name}_ms"]
        keys += [f"p{p}_{name}_ms" for p in PERCENTILES]
        values = [self.mean, self.median, self.std, self.p50, self.p90, self.p95, self.p99]
        return dict(zip(keys, values, strict=True))


def summary(name: str, values_s: list[float]) -> dict[str, float | None]:
    """mean/median/std/p50.../p99 of `name` in milliseconds (None when nothing was measured)."""
    return Latency.of(values_s).as_dict(name)


@dataclass(frozen=True, slots=True)
class Totals:
    """The measured pass summed over its requests."""

    completed: int
    failed: int
    input_tokens: int
    output_tokens: int
    request_throughput: float | None
    output_throughput: float | None
    total_token_throughput: float | None
    cached_tokens: int | None
    """What the server reported, None when it reported nothing."""
    predicted_cached_tokens: int
    cached_tokens_match: bool | None
    """None when the server reported no cached tokens."""


@dataclass(slots=True)
class Failures:
    count: int
    status_codes: dict[str, int]
    first_error: str | None


@dataclass(slots=True)
class PassResult:
    """One pass of the trace against the server."""

    label: str
    duration: float
    timings: list[RequestTiming]
    max_concurrent_requests: int
    interrupted: bool = False
    metrics_delta: dict[str, float] | None = None

    @property
    def completed(self) -> list[RequestTiming]:
        return [timing for timing in self.timings if timing.ok]

    def failures(self) -> Failures:
        failed = [timing for timing in self.timings if not timing.ok and timing.error]
        codes = Counter(str(t.status) if t.status is not None else "none" for t in failed)
        return Failures(
            len(failed), dict(sorted(codes.items())), failed[0].error if failed else None
        )

    def latency_summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, latency in self.latencies().items():
            out.update(latency.as_dict(name))
        return out

    def latencies(self) -> dict[str, Latency]:
        """Each of `METRICS` over the completed requests."""
        done = self.completed
        tpots = [
            (t.latency_s - t.ttft_s) / (t.completion_tokens - 1)
            for t in done
            if t.ttft_s is not None and t.latency_s is not None and (t.completion_tokens or 0) > 1
        ]
        values = {
            "ttft": [t.ttft_s for t in done if t.ttft_s is not None],
            "first_chunk": [t.first_chunk_s for t in done if t.first_chunk_s is not None],
            "tpot": tpots,
            "itl": [gap for t in done for gap in t.itl_s],
            "e2el": [t.latency_s for t in done if t.latency_s is not None],
        }
        return {name: Latency.of(values[name]) for name in METRICS}


@dataclass(slots=True)
class CacheComparison:
    """Two passes of the same trace: how the server's cache changed TTFT."""

    strategy: str
    """`salted` (cache off: a unique cache_salt per request), or `cold-warm` (first pass
    after a reset where possible, second pass warm)."""
    note: str
    reset: str | None
    """The reset route used between passes (`/reset_prefix_cache`, `/flush_cache`) or None."""
    run_order: list[str]
    cache_on: dict[str, Any]
    cache_off: dict[str, Any]
    speedup_median_ttft: float | None


@dataclass(slots=True)
class EndpointMeasurement:
    """An endpoint replay: the measured pass, the prediction, the server's own counters (the
    `endpoint` of a `ReplayReport`, whose own fields hold the simulator's figures)."""

    backend: str
    endpoint: str
    model_id: str
    server_kind: str | None
    num_prompts: int
    max_concurrency: int | None
    request_rate: float | None
    burstiness: float
    time_scale: float
    measured: PassResult
    input_lens: list[int]
    """Prompt tokens per request: the server's usage when reported, else pcache's count."""
    predicted_cached_tokens: list[int]
    cached_tokens_field: str | None
    cached_tokens_hint: str | None
    prediction_assumptions: str
    server_metrics: dict[str, Any] | None
    server_metrics_note: str | None
    compare_cache: CacheComparison | None = None
    notes: list[str] = field(default_factory=list)
    block_size: int | None = None
    """The block size the prediction used, and where it came from (`block_size_source`)."""
    block_size_source: str = ""
    tokenization: str = ""
    """Where the prediction's token ids came from (the server's /tokenize, a tokenizer...)."""
    pcache_input_lens: list[int] = field(default_factory=list)
    """Prompt tokens per request as the prediction counted them."""
    prompt_tokens_mismatch: Any = None
    """`endpoint_tokenize.PromptMismatch`: where the server's counts differ from pcache's."""
    usage_problems: list[int] = field(default_factory=list)
    """Requests whose usage held impossible counts (taken as unknown)."""
    tokens_mismatch: dict[str, Any] | None = None
    """With -t: the first request and token where pcache's tokens differ from /tokenize's."""
    kv_events: Any = None
    """`endpoint_kv_check.KVEventCheck`: the server's KV events against pcache's pool."""
    replicas: list[Any] | None = None
    """`endpoint_replicas.ReplicaCounts` of each replica (--replica-metrics)."""
    prediction_mode: str = "serial"
    """`serial` (one at a time, trace order), or `timed`: the requests overlapped, and the
    pool was replayed on the run's own timeline (`predicted_serial_cached_tokens` beside)."""
    predicted_serial_cached_tokens: list[int] = field(default_factory=list)
    capacity_blocks: int | None = None
    """The pool the prediction replayed, in blocks prompts can use (None: unlimited)."""
    capacity_source: str = ""
    miss_reasons: dict[str, Any] | None = None
    """Why the server did not serve each request's missed tokens (`per_request`: each a
    `MissReasons.to_dict()`, None where unknown), their `total` by reason, and the
    requests whose cached tokens differ from the prediction's, with why (`differences`)."""

    def cached_tokens(self) -> list[int | None]:
        return [t.cache.cached_tokens if t.ok else None for t in self.measured.timings]

    def mismatched_requests(self) -> list[int]:
        return [
            index
            for index, (seen, predicted) in enumerate(
                zip(self.cached_tokens(), self.predicted_cached_tokens, strict=True)
            )
            if seen is not None and seen != predicted
        ]

    def output_lens(self) -> list[int | None]:
        return [t.completion_tokens if t.ok else None for t in self.measured.timings]

    def totals(self) -> Totals:
        measured = self.measured
        done = measured.completed
        total_out = sum(value or 0 for value in self.output_lens())
        total_in = sum(self.input_lens[t.index] for t in done)
        duration = measured.duration
        known = [value for value in self.cached_tokens() if value is not None]
        return Totals(
            completed=len(done),
            failed=self.num_prompts - len(done),
            input_tokens=total_in,
            output_tokens=total_out,
            request_throughput=round(len(done) / duration, 6) if duration else None,
            output_throughput=round(total_out / duration, 6) if duration else None,
            total_token_throughput=round((total_in + total_out) / duration, 6)
            if duration
            else None,
            cached_tokens=sum(known) if known else None,
            predicted_cached_tokens=sum(self.predicted_cached_tokens),
            cached_tokens_match=(not self.mismatched_requests()) if known else None,
        )

    def request_rows(self) -> list[dict[str, Any]]:
        """One row per request of the measured pass (`replay --endpoint -o FILE`)."""
        timings = self.measured.timings
        output_lens, cached = self.output_lens(), self.cached_tokens()
        rows = []
        for index in range(self.num_prompts):
            timing = timings[index]
            ok = timing.ok
            rows.append(
                {
                    "request": index,
                    "ttft": timing.ttft_s if ok else None,
                    "first_chunk_time": timing.first_chunk_s if ok else None,
                    "e2el": timing.latency_s if ok else None,
                    "input_len": self.input_lens[index],
                    "output_len": output_lens[index],
                    "itls": timing.itl_s,
                    "cached_tokens": cached[index],
                    "predicted_cached_tokens": self.predicted_cached_tokens[index],
                    "miss_reasons": self.miss_reasons["per_request"][index]
                    if self.miss_reasons
                    else None,
                    "pcache_input_len": self.pcache_input_lens[index]
                    if self.pcache_input_lens
                    else None,
                    "usage_problem": timing.usage_problem,
                    "error": timing.error,
                }
            )
        return rows

    @property
    def request_rate_label(self) -> float | str:
        return _rate(self.request_rate)

    def to_dict(self) -> dict[str, Any]:
        from dataclasses import asdict

        measured = self.measured
        duration = measured.duration
        cached = self.cached_tokens()
        totals = self.totals()
        data: dict[str, Any] = {
            "backend": self.backend,
            "endpoint": self.endpoint,
            "model_id": self.model_id,
            "server_kind": self.server_kind,
            "num_prompts": self.num_prompts,
            "completed": totals.completed,
            "failed": totals.failed,
            "interrupted": measured.interrupted,
            "duration": round(duration, 6),
            "max_concurrency": self.max_concurrency,
            "request_rate": self.request_rate_label,
            "burstiness": self.burstiness,
            "time_scale": self.time_scale,
            "max_concurrent_requests": measured.max_concurrent_requests,
            "total_input_tokens": totals.input_tokens,
            "total_output_tokens": totals.output_tokens,
            "request_throughput": totals.request_throughput,
            "output_throughput": totals.output_throughput,
            "total_token_throughput": totals.total_token_throughput,
            **measured.latency_summary(),
            "start_times": [round(t.start_s, 6) for t in measured.timings],
            "ttfts": [t.ttft_s if t.ok else None for t in measured.timings],
            "first_chunk_times": [t.first_chunk_s if t.ok else None for t in measured.timings],
            "itls": [t.itl_s for t in measured.timings],
            "e2els": [t.latency_s if t.ok else None for t in measured.timings],
            "input_lens": self.input_lens,
            "output_lens": self.output_lens(),
            "errors": [t.error for t in measured.timings],
            "retries": sum(t.retries for t in measured.timings),
            "failures": asdict(measured.failures()),
            "cached_tokens": cached,
            "cached_tokens_field": self.cached_tokens_field,
            "cached_tokens_hint": self.cached_tokens_hint,
            "total_cached_tokens": totals.cached_tokens,
            "predicted_cached_tokens": self.predicted_cached_tokens,
            "total_predicted_cached_tokens": totals.predicted_cached_tokens,
            "prediction_assumptions": self.prediction_assumptions,
            "predicted_fields": PREDICTED_FIELDS,
            "cached_tokens_match": totals.cached_tokens_match,
            "mismatched_requests": self.mismatched_requests(),
            "server_metrics": self.server_metrics,
            "server_metrics_note": self.server_metrics_note,
            "compare_cache": asdict(self.compare_cache) if self.compare_cache else None,
            "notes": self.notes,
            "block_size": self.block_size,
            "block_size_source": self.block_size_source,
            "tokenization": self.tokenization,
            "pcache_input_lens": self.pcache_input_lens,
            "prompt_tokens_mismatch": asdict(self.prompt_tokens_mismatch)
            if self.prompt_tokens_mismatch is not None
            else None,
            "usage_problems": self.usage_problems,
            "tokens_mismatch": self.tokens_mismatch,
            "prediction_mode": self.prediction_mode,
            "predicted_serial_cached_tokens": self.predicted_serial_cached_tokens,
            "capacity_blocks": self.capacity_blocks,
            "capacity_source": self.capacity_source,
            "miss_reasons": self.miss_reasons["total"] if self.miss_reasons else None,
            "request_miss_reasons": self.miss_reasons["per_request"] if self.miss_reasons else None,
            "prediction_differences": self.miss_reasons["differences"] if self.miss_reasons else [],
        }
        if self.kv_events is not None:
            data["kv_events"] = self.kv_events.to_dict()
        if self.replicas is not None:
            data["replicas"] = [replica.to_dict() for replica in self.replicas]
        return data


def _rate(rate: float | None) -> float | str:
    """As vllm bench serve writes it: a number, or "inf"; "trace" for the trace's timestamps."""
    if rate is None:
        return "trace"
    return "inf" if math.isinf(rate) else rate
