"""`pcache replay --endpoint URL`: replay a trace against a live OpenAI-compatible server.

What is sent is `pcache.replayer.endpoint_requests`'s; how one request is timed,
`pcache.replayer.endpoint_client`'s; the report, `pcache.replayer.endpoint_report`'s.
Passes: one measured pass, or with `compare_cache` two (cache off by a `cache_salt` per
request on vLLM and pcache serve, else cold against warm), each between two `/metrics`
scrapes; every request is sent at its arrival offset, at most `max_concurrency` at a time.

The prediction is the simulator's (vLLM block pool, `block_size`, `cache_blocks`, serial,
from an empty cache) over the same token ids: for a serial replay on a server whose cache
starts empty, a server that caches as vLLM does reports exactly the predicted tokens.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass, field, replace
from typing import Any

from pcache.errors import InputError
from pcache.replayer.arrivals import arrival_offsets
from pcache.replayer.endpoint_client import ROUTES, RequestTiming, send_request
from pcache.replayer.endpoint_options import EndpointOptions
from pcache.replayer.endpoint_report import CacheComparison, EndpointMeasurement, PassResult
from pcache.replayer.endpoint_requests import materialize, request_bodies
from pcache.replayer.endpoint_server import headers_for, reset_cache, scrape, served_model
from pcache.replayer.report import ReplayReport, distribution_of
from pcache.replayer.reported_cache import enable_hint
from pcache.replayer.server_metrics import metrics_delta
from pcache.traces.record import Trace

__all__ = ["EndpointOptions", "replay_endpoint", "served_model"]


@dataclass(slots=True)
class Progress:
    """The passes run so far; what a Ctrl-C leaves behind is reported from here."""

    passes: list[PassResult] = field(default_factory=list)
    started: float | None = None


def predict(trace: Trace, options: EndpointOptions) -> ReplayReport:
    """The simulator's replay of the same tokens: vLLM pool, serial, from an empty cache."""
    from pcache.replayer.simulate import SimulationOptions, simulate

    simulation = SimulationOptions(
        policy="vllm",
        cache_blocks=options.cache_blocks,
        block_size=options.settings.block_size,
        concurrency="serial",
        hash_algo=options.settings.hash_algo,
    )
    return simulate(trace, simulation, keep_requests=True)


# -- the server ------------------------------------------------------------------------------


async def _run_pass(
    label: str,
    bodies: list[dict[str, Any]],
    offsets: list[float],
    options: EndpointOptions,
    client: Any,
    secret: str | None,
    progress: Progress,
) -> PassResult:
    timings = [RequestTiming(index) for index in range(len(bodies))]
    result = PassResult(label, 0.0, timings, 0)
    progress.passes.append(result)
    semaphore = asyncio.Semaphore(options.max_concurrency or len(bodies) or 1)
    url = options.base + ROUTES[options.api]
    in_flight = 0
    start = time.perf_counter()
    progress.started = start

    async def one(index: int) -> None:
        nonlocal in_flight
        delay = start + offsets[index] - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        async with semaphore:
            in_flight += 1
            result.max_concurrent_requests = max(result.max_concurrent_requests, in_flight)
            try:
                await send_request(
                    client, url, bodies[index], options.api, timings[index], start,
                    options.retries, secret,
                )  # fmt: skip
            finally:
                in_flight -= 1

    try:
        await asyncio.gather(*(one(index) for index in range(len(bodies))))
    finally:
        result.duration = time.perf_counter() - start
    return result


def _salted(bodies: list[dict[str, Any]]) -> list[dict[str, Any]]:
    run = uuid.uuid4().hex
    return [
        {**body, "cache_salt": f"pcache-off-{run}-{index}"} for index, body in enumerate(bodies)
    ]


async def _replay(
    bodies: list[dict[str, Any]],
    offsets: list[float],
    options: EndpointOptions,
    progress: Progress,
    transport: Any = None,
) -> dict[str, Any]:
    import httpx

    headers, secret = headers_for(options)
    limits = httpx.Limits(max_connections=options.max_concurrency, max_keepalive_connections=None)
    timeout = httpx.Timeout(options.timeout_s, connect=min(options.timeout_s, 10.0), pool=None)
    found: dict[str, Any] = {"notes": []}
    async with httpx.AsyncClient(
        headers=headers, timeout=timeout, limits=limits, transport=transport
    ) as client:
        before, note = (await scrape(client, options)) if options.scrape_metrics else (None, None)
        kind = before.kind if before is not None else None
        found.update(kind=kind, metrics_note=note)

        async def measured_pass(label: str, pass_bodies: list[dict[str, Any]]) -> PassResult:
            start, _ = (await scrape(client, options)) if before is not None else (None, None)
            result = await _run_pass(label, pass_bodies, offsets, options, client, secret, progress)
            end, _ = (await scrape(client, options)) if start is not None else (None, None)
            if start is not None and end is not None:
                result.metrics_delta = metrics_delta(start, end)
                found.setdefault("snapshots", {})[label] = (start, end)
            return result

        reset = None
        if options.reset_cache or options.compare_cache:
            reset = await reset_cache(client, options, kind)
            if reset is None:
                found["notes"].append("the server has no prefix-cache reset route; not reset")
        if not options.compare_cache:
            found["measured"] = await measured_pass("measured", bodies)
            return found
        salted = kind in ("vllm", "pcache") and options.api != "anthropic"
        if salted:
            off = await measured_pass("cache_off", _salted(bodies))
            if not off.completed and {t.status for t in off.timings} == {400}:
                salted = False  # the server refuses cache_salt: cold against warm instead
                progress.passes.remove(off)
                found["notes"].append(
                    f"the server refused cache_salt ({off.failures().first_error});"
                    " compared the cold pass with the warm one instead"
                )
                if reset is not None:
                    await reset_cache(client, options, kind)
        if salted:
            if reset is not None:
                await reset_cache(client, options, kind)
            on = await measured_pass("cache_on", bodies)
            found["measured"], order = on, ["cache_off", "cache_on"]
            note = (
                "cache off: every request carried its own cache_salt, so none could reuse"
                " another's blocks; cache on: the trace as is"
                + (f", after {reset}" if reset else "")
            )
        else:
            cold = await measured_pass("cold", bodies)
            warm = await measured_pass("warm", bodies)
            off, on, order = cold, warm, ["cold", "warm"]
            found["measured"] = cold
            note = (
                "no way to switch this server's cache off: the first pass (cold"
                + (f", after {reset})" if reset else "; it may hit prefixes cached before the run)")
                + " against the second (warm: every prefix of the trace was cached by the first)"
            )
        found["comparison"] = (salted, note, reset, order, off, on)
    return found


def replay_endpoint(trace: Trace, options: EndpointOptions, transport: Any = None) -> ReplayReport:
    """Replay `trace` against `options.url`. The report's own fields are the simulator's
    prediction for the trace (the server's pool cannot be observed); what the server did is
    its `endpoint` measurement, and its `ttft_ms` are the measured TTFTs. On Ctrl-C the
    passes run so far are reported (`interrupted` is true). `transport`: an httpx transport
    to use instead of the network."""
    trace = materialize(trace, options)
    if not trace.records:
        raise InputError(trace.source, "no requests to replay")
    bodies = request_bodies(trace, options)
    prediction = predict(trace, options)
    predicted = [outcome.cached_tokens for outcome in prediction.per_request]
    offsets = arrival_offsets(
        [record.timestamp_ms for record in trace.records]
        if trace.has_timestamps
        else [0.0] * len(trace.records),
        rate=options.rate,
        burstiness=options.burstiness,
        time_scale=options.time_scale,
        seed=options.seed,
    )
    progress = Progress()
    interrupted = False
    found: dict[str, Any] = {}
    try:
        found = asyncio.run(_replay(bodies, offsets, options, progress, transport))
    except KeyboardInterrupt:
        interrupted = True
    if not progress.passes:
        raise KeyboardInterrupt
    measurement = _measurement(trace, options, bodies, predicted, progress, found, interrupted)
    measured = [t.ttft_s * 1000 for t in measurement.measured.timings if t.ok and t.ttft_s]
    off = found.get("comparison", (None,) * 6)[4]
    off_ttfts = [t.ttft_s * 1000 for t in off.timings if t.ok and t.ttft_s] if off else []
    return replace(
        prediction,
        mode="endpoint",
        ttft_ms=distribution_of(measured) if measured else {},
        ttft_uncached_ms=distribution_of(off_ttfts) if off_ttfts else {},
        ttft_model=None,
        endpoint=measurement,
        per_request=[],
    )


def _measurement(
    trace: Trace,
    options: EndpointOptions,
    bodies: list[dict[str, Any]],
    predicted: list[int],
    progress: Progress,
    found: dict[str, Any],
    interrupted: bool,
) -> EndpointMeasurement:
    if interrupted:
        last = progress.passes[-1]
        last.interrupted = True
        if progress.started is not None and not last.duration:
            last.duration = time.perf_counter() - progress.started
    measured = found.get("measured") or progress.passes[-1]
    kind = found.get("kind")
    timings = measured.timings
    input_lens = [
        timing.prompt_tokens if timing.prompt_tokens is not None else record.input_length
        for timing, record in zip(timings, trace.records, strict=True)
    ]
    fields = {t.cache.field for t in timings if t.ok and t.cache.field is not None}
    reported = any(t.ok and t.cache.cached_tokens is not None for t in timings)
    hint = None if reported or not any(t.ok for t in timings) else enable_hint(kind)
    server_metrics = None
    snapshots = found.get("snapshots", {}).get(measured.label)
    if snapshots is not None:
        start, end = snapshots
        done = [t for t in timings if t.ok]
        server_metrics = {
            "before": start.counters,
            "after": end.counters,
            "delta": measured.metrics_delta,
            "client": {
                "prompt_tokens": sum(input_lens[t.index] for t in done),
                "cached_tokens": sum(t.cache.cached_tokens or 0 for t in done)
                if reported
                else None,
                "completion_tokens": sum(t.completion_tokens or 0 for t in done),
            },
        }
    assumptions = (
        f"vLLM block pool, {options.settings.block_size}-token blocks,"
        f" {options.cache_blocks or 'unlimited'} blocks, requests one at a time in trace order,"
        " starting from an empty cache"
    )
    if options.api != "completions":
        assumptions += (
            f"; prompts rendered as pcache's tokenizer {options.settings.tokenizer!r} renders them"
        )
    comparison = None
    if "comparison" in found:
        salted, note, reset, order, off, on = found["comparison"]
        off_summary, on_summary = off.latency_summary(), on.latency_summary()
        ratio = None
        if off_summary["median_ttft_ms"] and on_summary["median_ttft_ms"]:
            ratio = round(off_summary["median_ttft_ms"] / on_summary["median_ttft_ms"], 3)
        comparison = CacheComparison(
            "salted" if salted else "cold-warm",
            note,
            reset,
            order,
            {**on_summary, "completed": len(on.completed), "metrics_delta": on.metrics_delta},
            {**off_summary, "completed": len(off.completed), "metrics_delta": off.metrics_delta},
            ratio,
        )
    notes = list(found.get("notes", []))
    report = EndpointMeasurement(
        backend=options.backend,
        endpoint=options.base,
        model_id=options.model,
        server_kind=kind,
        num_prompts=len(bodies),
        max_concurrency=options.max_concurrency,
        request_rate=options.rate,
        burstiness=options.burstiness,
        time_scale=options.time_scale,
        measured=measured,
        input_lens=input_lens,
        predicted_cached_tokens=predicted,
        cached_tokens_field=", ".join(sorted(fields)) or None,
        cached_tokens_hint=hint,
        prediction_assumptions=assumptions,
        server_metrics=server_metrics,
        server_metrics_note=found.get("metrics_note"),
        compare_cache=comparison,
        notes=notes,
    )
    if report.mismatched_requests() and not (options.reset_cache or options.compare_cache):
        notes.append(
            "the server's cache was not reset before the replay (--reset-cache), so it may hold"
            " prefixes the prediction, which starts from an empty cache, does not"
        )
    return report
