"""`pcache replay --endpoint URL`: replay a trace against a live OpenAI-compatible server.

What is sent is `pcache.replayer.endpoint.requests`'s; how one request is timed,
`pcache.replayer.endpoint.client`'s; the report, `pcache.replayer.endpoint.report`'s.
Before predicting, the server is asked what it can tell: the model it serves (/v1/models),
its KV block size (`pcache.replayer.endpoint.server.server_block_size`; a given
`--block-size` wins) and, without `-t`, its own tokens for each prompt (/tokenize,
`pcache.replayer.endpoint.tokenize`). Passes: one measured pass, or with `compare_cache`
two (cache off by a `cache_salt` per request on vLLM and pcache serve, else cold against
warm), each between two `/metrics` scrapes; every request is sent at its arrival offset, at
most `max_concurrency` at a time, within `request_timeout_s`.

The prediction is the simulator's (vLLM block pool, the block size above, `cache_blocks`,
serial, from an empty cache) over the same token ids: for a serial replay on a server whose
cache starts empty, a server that caches as vLLM does reports exactly the predicted tokens.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass, field, replace
from typing import Any

from pcache.errors import InputError, PcacheError, UsageError
from pcache.replayer.arrivals import arrival_offsets
from pcache.replayer.endpoint.client import ROUTES, RequestTiming, send_request
from pcache.replayer.endpoint.kv_check import Replayed, check_kv_events
from pcache.replayer.endpoint.kv_events import KVEventSubscriber
from pcache.replayer.endpoint.options import EndpointOptions
from pcache.replayer.endpoint.replicas import (
    read_replica,
    replica_deltas,
    replica_models,
    router_workers,
)
from pcache.replayer.endpoint.report import CacheComparison, EndpointMeasurement, PassResult
from pcache.replayer.endpoint.reported_cache import enable_hint
from pcache.replayer.endpoint.requests import (
    default_api,
    materialize,
    request_bodies,
    trace_requests,
)
from pcache.replayer.endpoint.server import (
    SideFailure,
    headers_for,
    reset_cache,
    scrape,
    served_model,
    server_block_size,
    server_capacity,
)
from pcache.replayer.endpoint.server_metrics import metrics_delta
from pcache.replayer.endpoint.tokenize import (
    Tokenization,
    compare_prompt_tokens,
    first_difference,
    mismatch_note,
    server_tokens,
    token_cause,
    tokenize_body,
)
from pcache.replayer.report import ReplayReport, distribution_of
from pcache.traces.record import Trace

__all__ = ["EndpointOptions", "replay_endpoint"]


@dataclass(slots=True)
class Session:
    """What a replay learned and ran so far; what a Ctrl-C leaves behind is reported from
    here. `options` are the given ones with what the server said filled in."""

    options: EndpointOptions
    trace: Trace
    passes: list[PassResult] = field(default_factory=list)
    started: float | None = None
    bodies: list[dict[str, Any]] = field(default_factory=list)
    predicted: list[int] = field(default_factory=list)
    prediction: ReplayReport | None = None
    """The prediction for the pass that ran: `serial`, or timed on its own timeline."""
    serial: ReplayReport | None = None
    """The serial prediction (requests one at a time, in trace order)."""
    events: list[tuple] = field(default_factory=list)
    """The pool events of `prediction`'s replay (the KV-event check compares them)."""
    keys: dict[int, Any] = field(default_factory=dict)
    """The block keys of each request (by position) in that replay's pool."""
    block_size_source: str = ""
    capacity_source: str = ""
    tokenization: Tokenization | None = None
    found: dict[str, Any] = field(default_factory=lambda: {"notes": []})


def predict(
    trace: Trace,
    options: EndpointOptions,
    timings: list[RequestTiming] | None = None,
    publish_blocks: str | None = None,
) -> tuple[ReplayReport, Any]:
    """The simulator's replay of the same tokens through one vLLM pool of the server's size,
    from an empty cache, its misses explained; and what it watched (`Watched`): its pool's KV
    events and each request's block keys (by position), which the KV-event check reads.

    Serial (in trace order, one request at a time) without `publish_blocks`; given a run's
    `timings`, each request also writes the KV of the tokens it generated, as the server's
    did. With `publish_blocks` (and `timings`), timed on the run's own timeline: the requests
    that completed, each admitted at its step (`pcache.replayer.endpoint.timeline`), its
    blocks hits for others by `publish_blocks`' rule, held until its last step."""
    from pcache.replayer.simulate.driver import SimulationOptions, Watched, simulate

    timeline = None
    records = [replace(record, index=n) for n, record in enumerate(trace.records)]
    if timings is not None:  # outcomes by position, as the timings
        for index, timing in enumerate(timings):
            generated = _generated(index, timing.completion_tokens if timing.ok else None)
            records[index] = replace(records[index], output_token_ids=generated)
    if publish_blocks is not None:
        from pcache.replayer.endpoint.timeline import scheduled

        assert timings is not None
        steps = scheduled(timings)
        done = sorted(steps, key=lambda index: (steps[index][0], timings[index].start_s, index))
        records = [replace(records[index], timestamp_ms=steps[index][0]) for index in done]
        timeline = [steps[index][1:] for index in done]
    simulation = SimulationOptions(
        policy="vllm",
        cache_blocks=options.cache_blocks,
        block_size=options.settings.block_size,
        concurrency="serial" if publish_blocks is None else "timed",
        hash_algo=options.settings.hash_algo,
        publish_blocks=publish_blocks,
        explain_misses=True,
    )
    trace = replace(trace, records=records)
    watched = Watched(events=[], timeline=timeline, keys={})
    report = simulate(trace, simulation, keep_requests=True, watched=watched)
    return report, watched


def _generated(index: int, count: int | None) -> list[int] | None:
    """Stand-ins for the tokens a request generated (the stream gives text, not ids): as
    many, none equal to a prompt's, so that their blocks take room in the pool as the
    server's did and are hits for nothing."""
    if not count:
        return None
    base = (1 << 31) + (index % (1 << 15) << 16)  # token ids are below 2**32
    return list(range(base, base + min(count, 1 << 16)))


# -- what the server says about itself ---------------------------------------------------------


async def _learn_block_size(
    client: Any, session: Session, metrics: Any, secrets: list[str]
) -> None:
    options = session.options
    served = await server_block_size(client, options, metrics, secrets)
    given = options.settings.block_size
    if options.block_size_given:
        session.block_size_source = "given by --block-size"
        if served is not None and served.size != given:
            session.found["notes"].append(
                f"the server's blocks are {served.size} tokens ({served.source}); predicted"
                f" with --block-size {given} as given"
            )
    elif served is not None:
        session.options = replace(
            options, settings=replace(options.settings, block_size=served.size)
        )
        session.block_size_source = f"the server ({served.source})"
    elif not options.scrape_metrics:
        session.block_size_source = "the default (--no-server-metrics: /metrics was not read)"
    else:
        session.block_size_source = (
            "the default (the server publishes no block size: give --block-size)"
        )


def _local_tokenization(session: Session) -> Tokenization:
    options, trace = session.options, session.trace
    if trace.block_size is not None:
        return Tokenization("hash-ids", "seeded tokens per hash id (the trace has no text)")
    if options.tokenizer_given:
        return Tokenization("local", f"-t {options.settings.tokenizer}")
    return Tokenization("local", f"pcache's {options.settings.tokenizer} tokenizer")


async def _learn_tokens(
    client: Any, session: Session, requests: dict, secrets: list[str], side: Any = None
) -> None:
    """Without -t: a request trace's prompts as the server tokenizes them. With -t, the
    server's tokens (where it has /tokenize) are compared with pcache's, and a difference
    is a note. `side`: the options that reach the server's /tokenize (a replica's, behind a
    router), if not the replay's own."""
    options, trace = session.options, session.trace
    session.tokenization = _local_tokenization(session)
    bodies = [
        tokenize_body(requests[record.line], options.model) if record.line in requests else None
        for record in trace.records
    ]
    if trace.format == "requests" and not any(body is not None for body in bodies):
        session.tokenization = Tokenization("trace", "the trace's token ids")
        return
    if trace.format != "requests" or options.api == "anthropic":
        return
    try:
        tokens = await server_tokens(client, side or options, bodies, secrets)
    except SideFailure as failure:
        if not options.tokenizer_given:
            session.found["notes"].append(
                f"prompts were tokenized with pcache's {options.settings.tokenizer} tokenizer,"
                f" which may not be the served model's (give -t): {failure}"
            )
        return
    if options.tokenizer_given:
        _compare_with_server(session, requests, tokens)
        return
    records = [
        replace(record, token_ids=ids, input_length=len(ids)) if ids is not None else record
        for record, ids in zip(trace.records, tokens, strict=True)
    ]
    session.trace = replace(trace, records=records)
    session.tokenization = Tokenization("server", "the server's /tokenize")


def _compare_with_server(session: Session, requests: dict, tokens: list) -> None:
    """-t given: where pcache's tokens differ from the server's /tokenize, a note."""
    options, trace = session.options, session.trace
    local = [record.token_ids or [] for record in trace.records]
    difference = first_difference(local, tokens)
    if difference is None:
        return
    index, position = difference
    request = requests[trace.records[index].line]
    cause = token_cause(local[index], tokens[index], position)
    if cause is None and _renders_with_today(request, options, tokens[index]):
        cause = (
            f"the date: the template prints the date, and the server's is today's, not"
            f" --date {options.settings.date}"
        )
    cause = cause or "the chat template or the tokenizer (not the served model's)"
    session.found["token_mismatch"] = {"request": index, "position": position, "cause": cause}
    session.found["notes"].append(
        f"pcache's tokens (-t {options.settings.tokenizer}) differ from the server's /tokenize"
        f" from request {index}, token {position}; likely cause: {cause}. The predictions"
        " hash pcache's tokens"
    )


def _renders_with_today(request: Any, options: EndpointOptions, server: list[int]) -> bool:
    import datetime

    from pcache.prompt.renderers.render import prompt_token_ids, resolve_renderer

    today = datetime.date.today().isoformat()
    if today == options.settings.date:
        return False
    settings = replace(options.settings, date=today)
    try:
        renderer = resolve_renderer(settings.tokenizer)
        return list(prompt_token_ids(request, renderer, settings.render_options())) == server
    except (PcacheError, ValueError):  # only a guess at a cause: the note stands without it
        return False


def _plan(session: Session, requests: dict) -> None:
    """The token records and the bodies to send, from what was learned (the prediction comes
    after the pass: `_predict_ran`)."""
    options = session.options
    session.trace = materialize(session.trace, options)
    # behind a router, the text the replicas tokenized (/tokenize) is sent as text
    tokenization = session.tokenization
    text = bool(session.found.get("replica_urls")) and tokenization is not None
    text = text and tokenization.kind == "server"
    session.bodies = request_bodies(session.trace, options, requests, text)


async def _learn_capacity(client: Any, session: Session, metrics: Any, secrets: list[str]) -> None:
    """The pool the prediction replays: `--cache-blocks` as given, else the server's."""
    options = session.options
    if options.cache_blocks is not None:
        session.capacity_source = "given by --cache-blocks"
        return
    block_size = options.settings.block_size
    capacity = await server_capacity(client, options, metrics, block_size, secrets)
    if capacity is None:
        session.capacity_source = (
            "unlimited: the server publishes no pool size (give --cache-blocks)"
            if options.scrape_metrics
            else "unlimited (--no-server-metrics: /metrics was not read; give --cache-blocks)"
        )
        return
    session.options = replace(options, cache_blocks=capacity.blocks)
    session.capacity_source = f"the server's {capacity.source}"


def _predict_ran(session: Session, result: PassResult) -> None:
    """The prediction for the pass that ran, each request writing the KV of the tokens it
    generated: serial when requests came one at a time; when they overlapped, the pool
    replayed on the pass's own timeline, with the serial prediction kept beside it."""
    timings = result.timings
    session.serial, watched = predict(session.trace, session.options, timings)
    session.prediction = session.serial
    if result.max_concurrent_requests > 1:
        rule = "prefilled" if session.found.get("kind") == "sglang" else "scheduled"
        session.prediction, watched = predict(session.trace, session.options, timings, rule)
    session.events, session.keys = watched.events, watched.keys
    by_index = {outcome.index: outcome.cached_tokens for outcome in session.prediction.per_request}
    session.predicted = [
        by_index.get(outcome.index, outcome.cached_tokens) for outcome in session.serial.per_request
    ]


# -- the passes ------------------------------------------------------------------------------


async def _run_pass(
    label: str,
    bodies: list[dict[str, Any]],
    offsets: list[float],
    session: Session,
    client: Any,
    secrets: list[str],
) -> PassResult:
    options = session.options
    timings = [RequestTiming(index) for index in range(len(bodies))]
    result = PassResult(label, 0.0, timings, 0)
    session.passes.append(result)
    semaphore = asyncio.Semaphore(options.max_concurrency or len(bodies) or 1)
    url = options.route(ROUTES[options.api])
    counts = [record.input_length for record in session.trace.records]
    in_flight = 0
    start = time.perf_counter()
    session.started = start

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
                    options.retries, secrets, options.request_timeout_s, counts[index],
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


async def _replay(session: Session, requests: dict, offsets_of: Any, transport: Any = None) -> None:
    import httpx

    options = session.options
    found = session.found
    headers, secrets = headers_for(options)
    limits = httpx.Limits(max_connections=options.max_concurrency, max_keepalive_connections=None)
    timeout = httpx.Timeout(options.timeout_s, connect=min(options.timeout_s, 10.0), pool=None)
    async with httpx.AsyncClient(
        headers=headers, timeout=timeout, limits=limits, transport=transport
    ) as client:
        if not options.model:
            session.options = options = replace(
                options, model=await _model(client, options, requests, secrets, found)
            )
        before, note = (None, None)
        if options.scrape_metrics:
            before, note = await scrape(client, options, secrets)
        kind = before.kind if before is not None else None
        found.update(kind=kind, metrics_note=note)
        side, config = await _replica_side(client, options, before, secrets, found)
        await _learn_block_size(client, session, config, secrets)
        await _learn_capacity(client, session, config, secrets)
        await _learn_tokens(client, session, requests, secrets, side)
        _plan(session, requests)
        options = session.options
        bodies, offsets = session.bodies, offsets_of(session.trace)

        async def measured_pass(label: str, pass_bodies: list[dict[str, Any]]) -> PassResult:
            start, _ = (await scrape(client, options, secrets)) if before else (None, None)
            result = await _run_pass(label, pass_bodies, offsets, session, client, secrets)
            end, _ = (await scrape(client, options, secrets)) if start else (None, None)
            if start is not None and end is not None:
                result.metrics_delta = metrics_delta(start, end)
                found.setdefault("snapshots", {})[label] = (start, end)
            return result

        reset = None
        if options.reset_cache or options.compare_cache:
            reset = await reset_cache(client, options, kind, secrets)
            if reset is None:
                found["notes"].append("the server has no prefix-cache reset route; not reset")
        if not options.compare_cache:
            replicas = [await read_replica(client, options, u) for u in options.replica_metrics]
            subscriber = None
            if options.kv_events is not None:
                subscriber = KVEventSubscriber(options.kv_events)
                subscriber.start()
                subscriber.settle()
            try:
                found["measured"] = await measured_pass("measured", bodies)
            finally:
                received = subscriber.stop() if subscriber is not None else None
            _predict_ran(session, found["measured"])
            if received is not None:
                found["kv_events"] = _check_events(session, received, config)
            if options.replica_metrics:
                after = [await read_replica(client, options, u) for u in options.replica_metrics]
                found["replicas"] = replica_deltas(options.replica_metrics, replicas, after)
            return
        salted = kind in ("vllm", "pcache") and options.api != "anthropic"
        if salted:
            off = await measured_pass("cache_off", _salted(bodies))
            if not off.completed and {t.status for t in off.timings} == {400}:
                salted = False  # the server refuses cache_salt: cold against warm instead
                session.passes.remove(off)
                found["notes"].append(
                    f"the server refused cache_salt ({off.failures().first_error});"
                    " compared the cold pass with the warm one instead"
                )
                if reset is not None:
                    await reset_cache(client, options, kind, secrets)
        if salted:
            if reset is not None:
                await reset_cache(client, options, kind, secrets)
            on = await measured_pass("cache_on", bodies)
            found["measured"], order = on, ["cache_off", "cache_on"]
            _predict_ran(session, on)
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
            _predict_ran(session, cold)
            note = (
                "no way to switch this server's cache off: the first pass (cold"
                + (f", after {reset})" if reset else "; it may hit prefixes cached before the run)")
                + " against the second (warm: every prefix of the trace was cached by the first)"
            )
        found["comparison"] = (salted, note, reset, order, off, on)


async def _model(
    client: Any, options: EndpointOptions, requests: dict, secrets: list[str], found: dict
) -> str:
    """The model to name: the one the server lists. Behind a router that lists `unknown` (or,
    with --replica-metrics, none): the one its replicas list (--replica-metrics, else the
    workers the router lists), else the trace's own."""
    try:
        listed = await served_model(client, options, secrets)
    except PcacheError as error:
        if not options.replica_metrics:
            raise
        listed, failure = None, error
    if listed is not None and listed != "unknown":
        return listed
    replicas = options.replica_metrics or await router_workers(client, options)
    found["replica_urls"] = replicas
    models = sorted(set(await replica_models(client, options, replicas)))
    if len(models) == 1:
        found["notes"].append(
            f"the server lists no model it serves; sent the one its replicas serve: {models[0]}"
        )
        return models[0]
    named = {getattr(request, "model", None) for request in requests.values()} - {None, ""}
    if len(named) == 1:
        model = named.pop()
        found["notes"].append(f"the server lists no model it serves; sent the trace's: {model}")
        return model
    if listed is None:
        raise failure
    raise UsageError(
        f"--model not given and {options.shown} lists its model as `unknown` (a router?);"
        " give --model, or --replica-metrics with the replicas' URLs"
    )


async def _replica_side(
    client: Any, options: EndpointOptions, before: Any, secrets: list[str], found: dict
) -> tuple[Any, Any]:
    """Behind a router with no /metrics of its own: the options that reach its first replica
    and that replica's /metrics, for the block size, cache config and /tokenize (the replicas
    of one fleet are assumed alike). Else (None, the server's own /metrics)."""
    replicas = options.replica_metrics or found.get("replica_urls") or ()
    if (before is not None and before.block_size is not None) or not replicas:
        return None, before
    base = replicas[0].rstrip("/")
    side = replace(options, url=base if base.endswith("/v1") else f"{base}/v1")
    metrics, _ = await scrape(client, side, secrets) if options.scrape_metrics else (None, None)
    if metrics is None:
        return None, before
    found["notes"].append(
        f"the server publishes no block size; its block size, cache configuration and"
        f" tokens were read from replica {side.shown}"
    )
    return side, metrics


def _check_events(session: Session, received: Any, before: Any) -> Any:
    options = session.options
    config = before.cache_config if before is not None else {}
    blocks = config.get("num_gpu_blocks", "")
    records = session.trace.records
    keys = [session.keys.get(position, ()) for position in range(len(records))]
    return check_kv_events(
        options.kv_events or "",
        received,
        [record.token_ids or [] for record in records],
        options.settings.block_size,
        int(blocks) if blocks.isdigit() else options.cache_blocks,
        config.get("prefix_caching_hash_algo"),
        Replayed(session.events, keys, _pool_words(session)),
    )


def _pool_words(session: Session) -> str:
    """The prediction's pool and replay, in words."""
    options, prediction = session.options, session.prediction
    blocks = options.cache_blocks
    size = f"{blocks:,} blocks" if blocks is not None else "unlimited"
    mode = "on the run's timeline" if prediction and prediction.concurrency == "timed" else "serial"
    return f"{size} of {options.settings.block_size} tokens ({session.capacity_source}), {mode}"


def _served_reasons(session: Session, timings: list[RequestTiming]) -> dict[str, Any]:
    """Why each request's prompt tokens were not served, as the server reported them: the
    prediction's reasons for the tokens both missed, and where the two differ, why."""
    from pcache.replayer.miss_reasons import explain_served, summed

    prediction = session.prediction
    assert prediction is not None
    outcomes = {outcome.index: outcome for outcome in prediction.per_request}
    served_to: dict[int, set[int]] = {}  # request -> requests the replay served its blocks to
    for outcome in outcomes.values():
        for _, _, by in outcome.miss_reasons.hit_from if outcome.miss_reasons else ():
            if by >= 0 and by != outcome.index:
                served_to.setdefault(by, set()).add(outcome.index)
    behind_router = len(session.options.replica_metrics or session.found.get("replica_urls") or ())
    per_request: list[dict[str, Any] | None] = []
    explained = []
    differences = []
    for timing in timings:
        outcome = outcomes.get(timing.index)
        served = timing.cache.cached_tokens if timing.ok else None
        if outcome is None or outcome.miss_reasons is None or served is None:
            per_request.append(None)
            continue
        fewer = served < outcome.cached_tokens
        others = _sources(outcome, served) if fewer else served_to.get(timing.index, set())
        raced = [  # the tokens went the other way between the two: theirs differ the other way
            other
            for other in sorted(others)
            if _in_flight(timing, timings[other])
            and _differs(timings[other], outcomes.get(other), more=fewer)
        ]
        reasons, why = explain_served(
            outcome.miss_reasons,
            outcome.cached_tokens,
            served,
            outcome.prompt_tokens,
            behind_router > 1,
            raced,
        )
        explained.append(reasons)
        per_request.append(reasons.to_dict())
        if why is not None:
            differences.append({"request": timing.index, "why": why})
    return {
        "per_request": per_request,
        "total": summed(explained) if explained else None,
        "differences": differences,
    }


def _sources(outcome: Any, served: int) -> set[int]:
    """The requests that computed the tokens the replay served beyond `served`."""
    return {
        by
        for start, end, by in outcome.miss_reasons.hit_from
        if end > served and start < outcome.cached_tokens and by >= 0 and by != outcome.index
    }


def _differs(timing: RequestTiming, outcome: Any, more: bool) -> bool:
    """The server served this request more (`more`) or fewer tokens than the replay."""
    served = timing.cache.cached_tokens if timing.ok else None
    if served is None or outcome is None:
        return False
    return served > outcome.cached_tokens if more else served < outcome.cached_tokens


def _in_flight(one: RequestTiming, other: RequestTiming) -> bool:
    """Each was sent before the other's first token: either could reach the scheduler first."""
    if not (one.ok and other.ok):
        return False
    firsts = []
    for timing in (one, other):
        first = timing.first_chunk_s if timing.first_chunk_s is not None else timing.ttft_s
        firsts.append(timing.start_s + (first if first is not None else timing.latency_s or 0))
    return one.start_s < firsts[1] and other.start_s < firsts[0]


def replay_endpoint(trace: Trace, options: EndpointOptions, transport: Any = None) -> ReplayReport:
    """Replay `trace` against `options.url`. The report's own fields are the simulator's
    prediction for the trace (the server's pool cannot be observed); what the server did is
    its `endpoint` measurement, and its `ttft_ms` are the measured TTFTs. On Ctrl-C the
    passes run so far are reported (`interrupted` is true). `transport`: an httpx transport
    to use instead of the network. A request trace is sent as its reader parsed it
    (`read_trace(..., keep_requests=True)`)."""
    if not trace.records:
        raise InputError(trace.source, "no requests to replay")
    requests = trace_requests(trace)
    if options.api is None:
        options = replace(options, api=default_api(trace, requests))
    if options.limit is not None:
        trace = replace(trace, records=trace.records[: options.limit])

    def offsets_of(planned: Trace) -> list[float]:
        return arrival_offsets(
            [record.timestamp_ms for record in planned.records]
            if planned.has_timestamps
            else [0.0] * len(planned.records),
            rate=options.rate,
            burstiness=options.burstiness,
            time_scale=options.time_scale,
            seed=options.seed,
        )

    session = Session(options, trace)
    interrupted = False
    try:
        asyncio.run(_replay(session, requests, offsets_of, transport))
    except KeyboardInterrupt:
        interrupted = True
    if not session.passes:
        raise KeyboardInterrupt
    if session.prediction is None:  # cut short during its pass: predict what ran of it
        _predict_ran(session, session.passes[-1])
    measurement = _measurement(session, interrupted)
    measured = [t.ttft_s * 1000 for t in measurement.measured.timings if t.ok and t.ttft_s]
    off = session.found.get("comparison", (None,) * 6)[4]
    off_ttfts = [t.ttft_s * 1000 for t in off.timings if t.ok and t.ttft_s] if off else []
    return replace(
        session.prediction,
        mode="endpoint",
        ttft_ms=distribution_of(measured) if measured else {},
        ttft_uncached_ms=distribution_of(off_ttfts) if off_ttfts else {},
        ttft_model=None,
        endpoint=measurement,
        per_request=[],
    )


def _measurement(session: Session, interrupted: bool) -> EndpointMeasurement:
    options, trace, found = session.options, session.trace, session.found
    if interrupted:
        last = session.passes[-1]
        last.interrupted = True
        if session.started is not None and not last.duration:
            last.duration = time.perf_counter() - session.started
    measured = found.get("measured") or session.passes[-1]
    kind = found.get("kind")
    timings = measured.timings
    own = [record.input_length for record in trace.records]
    input_lens = [
        timing.prompt_tokens if timing.prompt_tokens is not None else counted
        for timing, counted in zip(timings, own, strict=True)
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
    tokenization = session.tokenization or Tokenization("trace", "the trace's token ids")
    timed = session.prediction is not None and session.prediction.concurrency == "timed"
    blocks = options.cache_blocks
    publication = "a prefill's end" if found.get("kind") == "sglang" else "its admission"
    order = (
        "requests overlapped: each admitted in the server step its send and stream times place"
        " it in, first come first served, its blocks pinned until its last chunk's step and"
        f" hits for others from {publication}"
        if timed
        else "requests one at a time in trace order"
    )
    assumptions = (
        f"vLLM block pool, {options.settings.block_size}-token blocks,"
        f" {f'{blocks:,}' if blocks is not None else 'unlimited'} blocks"
        f" ({session.capacity_source}), {order},"
        f" starting from an empty cache; prompts tokenized by {tokenization.source}"
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
    done = [t for t in timings if t.ok]
    mismatch = compare_prompt_tokens(
        [t.prompt_tokens if t.ok else None for t in timings],
        own,
        tokenization,
        options.api or "completions",
        options.settings.tokenizer,
        options.settings.date,
    )
    if mismatch is not None:
        notes.append(mismatch_note(mismatch, len(done)))
    odd = [t for t in timings if t.ok and t.usage_problem]
    if odd:
        notes.append(
            f"the server reported impossible usage in {len(odd)} of {len(done)} requests,"
            f" taken as unknown (first: request {odd[0].index}: {odd[0].usage_problem})"
        )
    report = EndpointMeasurement(
        backend=options.backend,
        endpoint=options.shown,
        model_id=options.model,
        server_kind=kind,
        num_prompts=len(session.bodies),
        max_concurrency=options.max_concurrency,
        request_rate=options.rate,
        burstiness=options.burstiness,
        time_scale=options.time_scale,
        measured=measured,
        input_lens=input_lens,
        predicted_cached_tokens=session.predicted,
        cached_tokens_field=", ".join(sorted(fields)) or None,
        cached_tokens_hint=hint,
        prediction_assumptions=assumptions,
        server_metrics=server_metrics,
        server_metrics_note=found.get("metrics_note"),
        compare_cache=comparison,
        notes=notes,
        block_size=options.settings.block_size,
        block_size_source=session.block_size_source,
        tokenization=tokenization.source,
        pcache_input_lens=own,
        prompt_tokens_mismatch=mismatch,
        usage_problems=[t.index for t in odd],
        tokens_mismatch=found.get("token_mismatch"),
        kv_events=found.get("kv_events"),
        replicas=found.get("replicas"),
        prediction_mode="timed" if timed else "serial",
        predicted_serial_cached_tokens=[o.cached_tokens for o in session.serial.per_request]
        if session.serial is not None
        else [],
        capacity_blocks=blocks,
        capacity_source=session.capacity_source,
        miss_reasons=_served_reasons(session, timings),
    )
    if report.mismatched_requests() and not (options.reset_cache or options.compare_cache):
        notes.append(
            "the server's cache was not reset before the replay (--reset-cache), so it may hold"
            " prefixes the prediction, which starts from an empty cache, does not"
        )
    return report
