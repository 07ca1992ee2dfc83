"""`pcache replay --endpoint URL`: replay a trace against a live OpenAI-compatible server.

What is sent: `completions` (default) sends each request's token ids as the `prompt` of
`/v1/completions` (vLLM, SGLang and pcache serve accept token ids), so the server sees
exactly the tokens the simulator hashes; hash-id traces (Mooncake, Bailian) get seeded
token ids per block id, below `vocab_size`. `chat` sends a request trace's own messages to
`/v1/chat/completions` and `anthropic` to `/v1/messages`; the server renders them, and the
prediction assumes it renders them as pcache's `--tokenizer` does.

The prediction is the simulator's (vLLM block pool, `block_size`, `cache_blocks`, serial,
from an empty cache) over the same token ids: for a serial replay on a server whose cache
starts empty, a server that caches as vLLM does reports exactly the predicted tokens.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from dataclasses import dataclass, field, replace
from typing import Any

from pcache.errors import InputError, UsageError
from pcache.replay.arrivals import arrival_offsets
from pcache.replay.endpoint_client import APIS, ROUTES, RequestTiming, send_request
from pcache.replay.endpoint_report import CacheComparison, EndpointMeasurement, PassResult
from pcache.replay.report import ReplayReport, distribution_of
from pcache.replay.reported_cache import enable_hint
from pcache.replay.server_metrics import MetricsSnapshot, metrics_delta, parse_metrics
from pcache.traces.record import Trace, TraceRecord

DEFAULT_OUTPUT_TOKENS = 16
RESET_ROUTES = {"sglang": ("/flush_cache",), None: ("/reset_prefix_cache", "/flush_cache")}


@dataclass(frozen=True, slots=True)
class EndpointOptions:
    """How to replay against a server (the trace itself is read by the caller)."""

    url: str
    model: str
    api: str = "completions"
    max_concurrency: int | None = None
    rate: float | None = None
    burstiness: float = 1.0
    time_scale: float = 1.0
    compare_cache: bool = False
    reset_cache: bool = False
    api_key_env: str | None = None
    timeout_s: float = 300.0
    retries: int = 2
    ignore_eos: bool = False
    max_output_tokens: int | None = None
    max_prompt_tokens: int | None = None
    limit: int | None = None
    vocab_size: int = 512
    block_size: int = 16
    cache_blocks: int | None = None
    hash_algo: str = "pcache"
    tokenizer: str = "gpt-oss"
    seed: int = 0
    scrape_metrics: bool = True

    def __post_init__(self) -> None:
        if self.api not in APIS:
            raise UsageError(f"--api must be one of {', '.join(APIS)}, got {self.api!r}")
        if not self.url.startswith(("http://", "https://")):
            raise UsageError(f"--endpoint must be an http:// or https:// URL, got {self.url!r}")
        if self.max_concurrency is not None and self.max_concurrency < 1:
            raise UsageError("--max-concurrency must be at least 1")
        if not self.timeout_s > 0:
            raise UsageError("--timeout must be positive")
        if self.retries < 0:
            raise UsageError("--retries must be zero or more")
        if self.vocab_size < 2:
            raise UsageError("--vocab-size must be at least 2")

    @property
    def base(self) -> str:
        return self.url.rstrip("/")

    @property
    def root(self) -> str:
        """The server's root (for /metrics and cache resets): the URL without its /v1."""
        return self.base.removesuffix("/v1")

    @property
    def backend(self) -> str:
        return {"completions": "openai", "chat": "openai-chat", "anthropic": "anthropic"}[self.api]


@dataclass(slots=True)
class Progress:
    """The passes run so far; what a Ctrl-C leaves behind is reported from here."""

    passes: list[PassResult] = field(default_factory=list)
    started: float | None = None


# -- prompts ---------------------------------------------------------------------------------


def block_token_ids(seed: int, block_id: int, length: int, vocab_size: int) -> list[int]:
    """The tokens standing for one hash id: equal ids give equal tokens, whatever the request."""
    import numpy as np

    rng = np.random.default_rng([seed, block_id & ((1 << 63) - 1), int(block_id < 0)])
    return rng.integers(0, vocab_size, size=length).tolist()


def materialize(trace: Trace, options: EndpointOptions) -> Trace:
    """The trace with token ids on every record (hash ids become seeded tokens per block),
    cut to `limit` requests and `max_prompt_tokens` tokens a prompt."""
    block = trace.block_size or options.block_size
    records = []
    for record in trace.records[: options.limit]:
        if record.token_ids is not None:
            tokens = record.token_ids[: options.max_prompt_tokens]
            records.append(replace(record, token_ids=tokens, input_length=len(tokens)))
            continue
        tokens: list[int] = []
        for block_id in record.hash_ids or ():
            tokens += block_token_ids(options.seed, block_id, block, options.vocab_size)
        missing = record.input_length - len(tokens)
        if missing > 0:  # tokens the hash ids do not cover: unique to this request
            tokens += block_token_ids(options.seed + 1, record.index, missing, options.vocab_size)
        tokens = tokens[
            : min(record.input_length, options.max_prompt_tokens or record.input_length)
        ]
        records.append(replace(record, token_ids=tokens, hash_ids=None, input_length=len(tokens)))
    return replace(trace, records=records, block_size=None)


def _documents(trace: Trace) -> dict[int | None, Any]:
    from pcache.prompt.loading import iter_values

    return {
        entry[0]: entry[1]
        for entry in iter_values(trace.source, skip_errors=True)
        if isinstance(entry, tuple)
    }


def request_bodies(trace: Trace, options: EndpointOptions) -> list[dict[str, Any]]:
    """One streamed request body per record."""
    bodies = []
    documents = _documents(trace) if options.api != "completions" else {}
    for record in trace.records:
        output = options.max_output_tokens or record.output_length or DEFAULT_OUTPUT_TOKENS
        if options.max_output_tokens and record.output_length:
            output = min(output, record.output_length)
        if options.api == "completions":
            body: dict[str, Any] = {
                "model": options.model,
                "prompt": record.token_ids,
                "max_tokens": output,
                "temperature": 0,
                "stream": True,
                "stream_options": {"include_usage": True},
            }
            if record.cache_salt:
                body["cache_salt"] = record.cache_salt
        else:
            body = _message_body(trace, record, documents, options, output)
        if options.ignore_eos:
            body["ignore_eos"] = True
        bodies.append(body)
    return bodies


def _message_body(
    trace: Trace, record: TraceRecord, documents: dict, options: EndpointOptions, output: int
) -> dict[str, Any]:
    from pcache.prompt.request import SIDECAR_KEYS, request_from_document

    if trace.format != "requests" or record.line not in documents:
        raise UsageError(
            f"--api {options.api} replays request traces (messages), not {trace.format}"
        )
    request = request_from_document(documents[record.line], trace.source, record.line)
    if not request.messages:
        raise InputError(trace.source, f"--api {options.api} needs `messages`", record.line)
    body = {key: value for key, value in request.raw.items() if key not in SIDECAR_KEYS}
    body["model"] = options.model
    body["stream"] = True
    if options.api == "anthropic":
        body["max_tokens"] = output
    else:
        body.pop("max_tokens", None)
        body["max_completion_tokens"] = output
        body["stream_options"] = {"include_usage": True}
    return body


def predict(trace: Trace, options: EndpointOptions) -> ReplayReport:
    """The simulator's replay of the same tokens: vLLM pool, serial, from an empty cache."""
    from pcache.replay.simulate import SimulationOptions, simulate

    simulation = SimulationOptions(
        policy="vllm",
        cache_blocks=options.cache_blocks,
        block_size=options.block_size,
        concurrency="serial",
        hash_algo=options.hash_algo,
    )
    return simulate(trace, simulation, keep_requests=True)


# -- the server ------------------------------------------------------------------------------


def _headers(options: EndpointOptions) -> tuple[dict[str, str], str | None]:
    """Request headers and the secret they carry (never printed: errors are scrubbed of it)."""
    variable = options.api_key_env or (
        "ANTHROPIC_API_KEY" if options.api == "anthropic" else "OPENAI_API_KEY"
    )
    secret = os.environ.get(variable) or None
    headers = {"content-type": "application/json"}
    if options.api == "anthropic":
        headers["anthropic-version"] = "2023-06-01"
        if secret:
            headers["x-api-key"] = secret
    elif secret:
        headers["authorization"] = f"Bearer {secret}"
    return headers, secret


async def _scrape(
    client: Any, options: EndpointOptions
) -> tuple[MetricsSnapshot | None, str | None]:
    import httpx

    url = f"{options.root}/metrics"
    for attempt in range(options.retries + 1):  # a GET: safe to repeat
        try:
            response = await client.get(url, timeout=10)
        except httpx.HTTPError as error:
            if attempt == options.retries:
                return None, f"{url} unreachable ({type(error).__name__})"
            await asyncio.sleep(0.2 * (attempt + 1))
            continue
        if response.status_code != 200:
            return None, f"{url} answered HTTP {response.status_code}"
        try:
            return parse_metrics(response.text), None
        except ValueError as error:
            return None, f"{url} is not Prometheus text ({error})"
    return None, f"{url} unreachable"


async def _reset(client: Any, options: EndpointOptions, kind: str | None) -> str | None:
    """Reset the server's prefix cache; the route that worked, or None."""
    import httpx

    for route in RESET_ROUTES.get(kind, RESET_ROUTES[None]):
        try:
            response = await client.post(f"{options.root}{route}", timeout=30)
        except httpx.HTTPError:
            continue
        if response.status_code == 200:
            return route
    return None


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

    headers, secret = _headers(options)
    limits = httpx.Limits(max_connections=options.max_concurrency, max_keepalive_connections=None)
    timeout = httpx.Timeout(options.timeout_s, connect=min(options.timeout_s, 10.0), pool=None)
    found: dict[str, Any] = {"notes": []}
    async with httpx.AsyncClient(
        headers=headers, timeout=timeout, limits=limits, transport=transport
    ) as client:
        before, note = (await _scrape(client, options)) if options.scrape_metrics else (None, None)
        kind = before.kind if before is not None else None
        found.update(kind=kind, metrics_note=note)

        async def measured_pass(label: str, pass_bodies: list[dict[str, Any]]) -> PassResult:
            start, _ = (await _scrape(client, options)) if before is not None else (None, None)
            result = await _run_pass(label, pass_bodies, offsets, options, client, secret, progress)
            end, _ = (await _scrape(client, options)) if start is not None else (None, None)
            if start is not None and end is not None:
                result.metrics_delta = metrics_delta(start, end)
                found.setdefault("snapshots", {})[label] = (start, end)
            return result

        reset = None
        if options.reset_cache or options.compare_cache:
            reset = await _reset(client, options, kind)
            if reset is None:
                found["notes"].append("the server has no prefix-cache reset route; not reset")
        if not options.compare_cache:
            found["measured"] = await measured_pass("measured", bodies)
            return found
        salted = kind in ("vllm", "pcache") and options.api != "anthropic"
        if salted:
            off = await measured_pass("cache_off", _salted(bodies))
            if reset is not None:
                await _reset(client, options, kind)
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
        f"vLLM block pool, {options.block_size}-token blocks,"
        f" {options.cache_blocks or 'unlimited'} blocks, requests one at a time in trace order,"
        " starting from an empty cache"
    )
    if options.api != "completions":
        assumptions += (
            f"; prompts rendered as pcache's tokenizer {options.tokenizer!r} renders them"
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


def served_model(options: EndpointOptions) -> str:
    """The one model a server lists at /v1/models (when --model was not given)."""
    import httpx

    headers, secret = _headers(options)
    try:
        response = httpx.get(f"{options.base}/models", headers=headers, timeout=10)
        names = [card["id"] for card in response.json()["data"]]
    except (httpx.HTTPError, ValueError, KeyError, TypeError) as error:
        message = f"{type(error).__name__}: {error}".replace(secret or "\0", "***")
        raise UsageError(
            f"--model not given and {options.base}/models did not list one ({message})"
        ) from None
    if len(names) != 1:
        raise UsageError(
            f"--model not given; {options.base}/models lists {len(names)}: {', '.join(names[:5])}"
        )
    return names[0]
