"""Replay a trace through the built-in engine, prefix caching on and off (`replay --engine`).

The measurement:
- One set of weights, two engines over it, each with its own KV cache of the same capacity,
  the same scheduler settings and block size; only prefix caching differs.
- Warm-up, the same for both engines, before anything is timed: prompts of the trace's
  shortest, median and longest lengths (fresh random tokens, `--warmup` rounds, default 2,
  two output tokens each, so prefill and decode run), and on the caching engine the same
  prompts again so the cached-prefix path runs too. The KV tensors were zero-filled when
  allocated (every page touched). Then both caches are reset: each run starts from an
  empty pool.
- `serial`: one request at a time, the two engines interleaved request by request (cache on
  first for even requests, off first for odd ones; the other way round in odd repetitions),
  so machine noise hits both alike. TTFT = first token time - the time the request was
  added.
- `timed`: the trace's arrival times (gaps x `--time-scale`) against the engine's clock,
  with continuous batching; each request is added with its scheduled arrival time, so
  TTFT = first token time - arrival includes queueing. The two runs cannot share a clock:
  cache on runs first in even repetitions, cache off in odd ones.
- Timestamps are the engine's (`Sequence.first_token_time`, taken after the step's sampled
  tokens reached the host, which synchronizes a CUDA device).
- `--repeat N`: every figure is the median over the repetitions (per request, then over
  requests); `ttft_ms_runs` keeps each repetition's p50.
- `--threads N` (default: the physical cores) torch threads run the model.
- A pair (serial: one request on both engines; timed: one repetition's two runs) whose runs
  straddled a load change is measured again (`pcache.replayer.engine.stability`); a serial
  repeat first forgets the blocks the cache-on run published, so it sees the pool as the
  first attempt did. The per-pair speedups' median and IQR, the load before and after, and
  warnings when the spread or the load make the figures doubtful come with the report.

Beside it, the simulator replays the same token trace through the same pool with the same
capacity (given the tokens the engine generated, so decoding fills the same blocks), and
the TTFT model fitted to the cache-off run predicts the cache-on TTFTs from the simulated
cached tokens.
"""

from __future__ import annotations

import os
import statistics
import time
from dataclasses import dataclass, field, replace
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np

from pcache.cache.reuse import PrefixIndex
from pcache.errors import EngineError, UsageError
from pcache.replayer.calibration import fit_ttft_model, save_calibration
from pcache.replayer.engine.options import EngineOptions
from pcache.replayer.engine.stability import PairLog, RepeatBudget, stability_of, straddles
from pcache.replayer.report import (
    Measurement,
    ReplayReport,
    RequestOutcome,
    RunStats,
    distribution_of,
)
from pcache.replayer.tokens import Slicing, engine_trace
from pcache.traces.record import Trace, TraceRecord


@dataclass(slots=True)
class Sample:
    """One request of one run, as the engine timed it."""

    cached_tokens: int
    ttft_ms: float
    prefill_ms: float
    """First token - first scheduled: the TTFT without queueing (the fit's input in timed
    mode)."""
    duration_s: float
    start_ms: float
    output_token_ids: list[int]
    block_hashes: list = field(default_factory=list, repr=False)
    """The request's block hashes, prompt and output (to forget what it published)."""


@dataclass(slots=True)
class Run:
    """One repetition of one engine over the whole trace."""

    samples: list[Sample]
    wall_s: float
    evicted_blocks: int
    peak_used_blocks: int
    peak_shared_blocks: int = 0


@dataclass(slots=True)
class Runs:
    cache_on: list[Run] = field(default_factory=list)
    cache_off: list[Run] = field(default_factory=list)


def replay_engine(
    source: Any, options: EngineOptions, progress=None, load_meter=None
) -> tuple[ReplayReport, str, Trace]:
    """Measure the trace `source` through the engine; returns (report, model name, trace).
    `load_meter` reads the machine's load (`pcache.process.machine.LoadMeter`, the default)."""
    torch = _import_torch()
    from pcache.process.machine import LoadMeter, physical_cores

    threads = options.threads or physical_cores()
    previous_threads = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        return _replay_engine(torch, source, options, progress, load_meter or LoadMeter())
    finally:
        torch.set_num_threads(previous_threads)


def _replay_engine(torch, source, options: EngineOptions, progress, meter):
    if options.device == "gpu" and not torch.cuda.is_available():
        raise EngineError("--gpu needs a CUDA device, and torch finds none on this machine")
    from pcache.engine.config import EngineConfig, torch_device
    from pcache.engine.engine import Engine
    from pcache.engine.kv_cache import dtype_bytes, plan_num_blocks
    from pcache.engine.model_config import resolve_model_config

    assert options.model is not None
    model_config, directory = resolve_model_config(options.model)
    settings = options.settings
    own_tokenizer = directory is not None and (directory / "tokenizer.json").is_file()
    if own_tokenizer and not options.tokenizer_given:  # the model's tokenizer and template
        settings = replace(settings, tokenizer=str(directory))
    trace = options.read_trace(source, settings)
    slicing = Slicing(options.limit, options.max_prompt_tokens, options.max_output_tokens)
    max_model_len = model_config.max_position_embeddings
    tokens, cut = engine_trace(trace, model_config.vocab_size, max_model_len, slicing)
    block_size = settings.block_size
    footprint = _footprint_blocks(tokens.records, block_size)
    capacity = options.cache_blocks or footprint
    largest = max(-(-(r.input_length + r.output_length) // block_size) for r in tokens.records)
    if capacity < largest:
        raise UsageError(
            f"{trace.source}: a capacity of {capacity} blocks cannot hold its largest request"
            f" ({largest} blocks of {block_size} tokens); raise --cache-blocks"
        )
    config = EngineConfig(
        model=options.model,
        device=torch_device(options.device),
        block_size=block_size,
        num_kv_blocks=capacity + 1,
        hash_algo=settings.hash_algo,
        seed=options.seed,
    )
    # both KV caches and the weights must fit: checked before anything is allocated
    torch_dtype = getattr(torch, config.torch_dtype_name)
    try:
        plan_num_blocks(
            replace(config, num_kv_blocks=2 * (capacity + 1)),
            model_config,
            torch_dtype,
            max_model_len,
        )
    except EngineError as failure:
        raise EngineError(
            f"{failure} (two KV caches: cache on and off; --cache-blocks,"
            " --limit or --max-prompt-tokens make them smaller)"
        ) from None
    cache_on = Engine(config)
    cache_off = Engine(replace(config, enable_prefix_caching=False), runner=cache_on.runner)
    records = tokens.records
    _warm_up(
        cache_on,
        cache_off,
        records,
        model_config.vocab_size,
        options.seed,
        options.warmup_rounds,
    )
    probes = _probe(cache_off, records, model_config.vocab_size, options.seed)
    runs = Runs()
    serial = options.concurrency == "serial"
    log = PairLog()
    budget = RepeatBudget(len(records) * options.repeat if serial else options.repeat)
    before = meter.read()
    for repetition in range(options.repeat):
        if serial:
            on, off = _serial(
                cache_on, cache_off, records, repetition, progress, meter, budget, log
            )
        else:
            on, off = _timed_pair(
                cache_on,
                cache_off,
                records,
                options.time_scale,
                repetition,
                meter,
                budget,
                log,
                progress,
            )
        runs.cache_on.append(on)
        runs.cache_off.append(off)
    stability = stability_of(log, budget, torch.get_num_threads(), before, meter.read())
    kv_bytes = model_config.kv_bytes_per_token(dtype_bytes(torch_dtype))
    description = _Describe(
        machine=_machine(torch, config),
        model=options.model,
        dtype=config.torch_dtype_name,
        backend=config.backend_name,
        device=config.device,
    )
    report, calibration = _report(
        options, tokens, capacity, kv_bytes, runs, probes, cut, description, stability
    )
    if options.save_calibration is not None:
        save_calibration(options.save_calibration, calibration)
    name = Path(options.model).name if directory is not None else options.model
    return report, name, trace


def _import_torch():
    try:
        import torch
    except ImportError:
        raise EngineError("the engine needs torch: pip install 'pcache[engine]'") from None
    return torch


def _footprint_blocks(records: list[TraceRecord], block_size: int) -> int:
    """Blocks a pool needs to never evict: every distinct full prompt block (the full blocks of
    each prompt that the reuse index finds in no earlier prompt of its cache salt), and for
    each request the blocks its output fills plus its partial prompt block (an upper bound)."""
    index = PrefixIndex(block_size)
    distinct = total = 0
    for record in records:
        assert record.token_ids is not None
        full = len(record.token_ids) // block_size
        shared = index.observe(record.token_ids, record.cache_salt)
        distinct += full - min(shared // block_size, full)
        total += -(-(record.output_length + block_size) // block_size)
    return distinct + total


def _fresh_pool(engine) -> None:
    """After a run: the pool is intact and no block is referenced; then an empty pool."""
    engine.check_integrity()
    pool = engine.kv_manager.block_pool
    assert not engine.has_unfinished_requests()
    assert all(block.ref_cnt == 0 for block in pool.blocks[1:]), "a block is still referenced"
    engine.reset()


def _run_alone(engine, prompt: list[int], max_new_tokens: int, salt=None) -> Sample:
    """One request on an idle engine, to completion."""
    arrival = time.perf_counter()
    request_id = engine.add_request(
        prompt, max_new_tokens, salt, ignore_eos=True, arrival_time=arrival
    )
    engine.run_until_done()
    sequence = engine.sequences.pop(request_id)
    sample = _sample(sequence, arrival)
    sample.block_hashes = sequence.cache_request.block_hashes
    return sample


def _forget_published(engine, sample: Sample) -> None:
    """Undo what a finished request did to an idle pool, so that running it again meets the
    pool as it was: the blocks it published (every full block past its cache hit) lose their
    hashes and go back to the head of the free queue, in the order it took them, before its
    partial last block (which freeing already put there); not counted as evictions."""
    pool = engine.kv_manager.block_pool
    first = sample.cached_tokens // engine.config.block_size
    published = []
    for key in sample.block_hashes[first:]:
        found = pool.get_cached_block(key)
        if found is not None:
            published.extend(found)
    evicted = pool.evict(published)
    pool.num_evicted_blocks -= evicted
    pool.free_block_queue.remove_n(published)
    pool.free_block_queue.prepend_n(published)


def _sample(sequence, clock_start: float) -> Sample:
    return Sample(
        cached_tokens=sequence.num_cached_tokens or 0,
        ttft_ms=1000 * (sequence.first_token_time - sequence.arrival_time),
        prefill_ms=1000 * (sequence.first_token_time - sequence.first_scheduled_time),
        duration_s=sequence.finish_time - sequence.arrival_time,
        start_ms=1000 * (sequence.first_scheduled_time - clock_start),
        output_token_ids=list(sequence.output_token_ids),
    )


def _warm_up(cache_on, cache_off, records: list[TraceRecord], vocab_size, seed, rounds) -> None:
    lengths = sorted(record.input_length for record in records)
    picks = sorted({lengths[0], lengths[len(lengths) // 2], lengths[-1]})
    generator = np.random.default_rng([seed, 0x5741524D])  # never the trace's tokens
    for _ in range(rounds):
        for length in picks:
            prompt = generator.integers(0, vocab_size, length).tolist()
            for engine in (cache_on, cache_off):
                _run_alone(engine, prompt, 2)
            _run_alone(cache_on, prompt, 2)  # a hit: the cached-prefix path
    for engine in (cache_on, cache_off):
        _fresh_pool(engine)


PROBE_FRACTIONS = (1 / 16, 1 / 8, 1 / 4, 1 / 2, 3 / 4, 1)
PROBE_RUNS = 3


def _probe(cache_off, records: list[TraceRecord], vocab_size: int, seed: int):
    """Cache-off TTFTs of prompts of 1/16 to 1 times the longest prompt (fresh tokens, the
    fastest of three runs: a busy machine only ever adds time): a trace of one prompt length
    cannot separate the TTFT model's three terms."""
    longest = max(record.input_length for record in records)
    lengths = sorted({max(round(longest * fraction), 1) for fraction in PROBE_FRACTIONS})
    generator = np.random.default_rng([seed, 0x50524F42])
    samples = []
    for length in lengths:
        prompt = generator.integers(0, vocab_size, length).tolist()
        ttfts = [_run_alone(cache_off, prompt, 1).ttft_ms for _ in range(PROBE_RUNS)]
        samples.append((length, 0, min(ttfts)))
    _fresh_pool(cache_off)
    return samples


def _serial(
    cache_on, cache_off, records, repetition: int, progress, meter, budget, log: PairLog
) -> tuple[Run, Run]:
    samples: dict[int, list[Sample]] = {id(cache_on): [], id(cache_off): []}
    for position, record in enumerate(records):
        first_on = (position + repetition) % 2 == 0
        order = (cache_on, cache_off) if first_on else (cache_off, cache_on)
        attempts = 0
        while True:
            attempts += 1
            readings = [meter.read()]
            pair = {}
            for engine in order:
                pair[id(engine)] = _run_alone(
                    engine, record.token_ids, record.output_length, record.cache_salt
                )
                readings.append(meter.read())
            settled = not straddles(readings)
            if settled or not budget.take(attempts):
                break
            _forget_published(cache_on, pair[id(cache_on)])
        on, off = pair[id(cache_on)], pair[id(cache_off)]
        log.add(off.ttft_ms, on.ttft_ms, on.cached_tokens > 0, attempts, settled)
        samples[id(cache_on)].append(on)
        samples[id(cache_off)].append(off)
        if progress is not None:
            progress(1)
    runs = []
    for engine in (cache_on, cache_off):
        own = samples[id(engine)]
        pool = engine.kv_manager.block_pool
        runs.append(
            Run(
                own, sum(s.duration_s for s in own), pool.num_evicted_blocks, pool.max_block_id_used
            )
        )
        _fresh_pool(engine)
    return runs[0], runs[1]


def _timed_pair(
    cache_on, cache_off, records, time_scale: float, repetition: int, meter, budget, log, progress
) -> tuple[Run, Run]:
    """One repetition's two whole runs (the order alternates), again while they straddled
    a load change and repeats are left (progress counts the first attempt only)."""
    order = [cache_on, cache_off] if repetition % 2 == 0 else [cache_off, cache_on]
    attempts = 0
    while True:
        attempts += 1
        readings = [meter.read()]
        timed = {}
        for engine in order:
            timed[id(engine)] = _timed(
                engine, records, time_scale, progress if attempts == 1 else None
            )
            readings.append(meter.read())
        settled = not straddles(readings)
        if settled or not budget.take(attempts):
            break
    on, off = timed[id(cache_on)], timed[id(cache_off)]
    on_p50 = distribution_of(s.ttft_ms for s in on.samples)["p50"]
    off_p50 = distribution_of(s.ttft_ms for s in off.samples)["p50"]
    hit = any(sample.cached_tokens for sample in on.samples)
    log.add(off_p50, on_p50, hit, attempts, settled)
    return on, off


def _timed(engine, records: list[TraceRecord], time_scale: float, progress) -> Run:
    """The trace's arrivals against the engine's clock, continuous batching."""
    first = records[0].timestamp_ms
    offsets = [(record.timestamp_ms - first) * time_scale / 1000.0 for record in records]
    manager = engine.kv_manager
    usable = engine.runner.num_blocks - 1
    ids: list[str] = []
    next_request = 0
    peak_shared = 0
    start = time.perf_counter()
    while next_request < len(records) or engine.has_unfinished_requests():
        now = time.perf_counter()
        while next_request < len(records) and start + offsets[next_request] <= now:
            record = records[next_request]
            ids.append(
                engine.add_request(
                    record.token_ids,
                    record.output_length,
                    record.cache_salt,
                    ignore_eos=True,
                    arrival_time=start + offsets[next_request],
                )
            )
            next_request += 1
        if not engine.has_unfinished_requests():
            time.sleep(max(start + offsets[next_request] - time.perf_counter(), 0.0))
            continue
        for output in engine.step():
            if output.finished and progress is not None:
                progress(1)
        logical = sum(
            len(manager.req_to_blocks.get(s.request_id, ())) for s in engine.scheduler.running
        )
        referenced = usable - manager.block_pool.get_num_free_blocks()
        peak_shared = max(peak_shared, logical - referenced)
    wall = time.perf_counter() - start
    samples = [_sample(engine.sequences.pop(request_id), start) for request_id in ids]
    pool = manager.block_pool
    run = Run(samples, wall, pool.num_evicted_blocks, pool.max_block_id_used, peak_shared)
    _fresh_pool(engine)
    return run


@dataclass(frozen=True, slots=True)
class _Describe:
    machine: str
    model: str
    dtype: str
    backend: str
    device: str


def _machine(torch, config) -> str:
    if config.is_cuda:
        return (
            f"{torch.cuda.get_device_name(torch.device(config.device))}, torch {torch.__version__}"
        )
    from pcache.process.machine import cpu_name

    return (
        f"{cpu_name()}, {os.cpu_count()} CPUs, {torch.get_num_threads()} torch threads,"
        f" torch {torch.__version__}"
    )


def _median_per_request(runs: list[Run], value) -> list[float]:
    return [
        statistics.median(value(run.samples[index]) for run in runs)
        for index in range(len(runs[0].samples))
    ]


def _run_stats(runs: list[Run], records: list[TraceRecord]) -> RunStats:
    ttfts = _median_per_request(runs, lambda sample: sample.ttft_ms)
    wall = statistics.median(run.wall_s for run in runs)
    prompt_tokens = sum(record.input_length for record in records)
    generated = sum(len(sample.output_token_ids) for sample in runs[0].samples)
    cached = sum(sample.cached_tokens for sample in runs[0].samples)
    return RunStats(
        ttft_ms=distribution_of(ttfts),
        prefill_tokens_computed=prompt_tokens - cached,
        cached_tokens=cached,
        wall_s=round(wall, 4),
        prompt_tokens_per_s=round(prompt_tokens / wall, 1) if wall else 0.0,
        generated_tokens_per_s=round(generated / wall, 1) if wall else 0.0,
        generated_tokens=generated,
        peak_used_blocks=runs[0].peak_used_blocks,
        ttft_ms_runs=[distribution_of(s.ttft_ms for s in run.samples)["p50"] for run in runs],
    )


def _ratio(numerator: float, denominator: float) -> float | None:
    return round(numerator / denominator, 4) if denominator else None


def _calibration(options: EngineOptions, records, off_runs: list[Run], probes, described):
    """The TTFT model fitted to the cache-off TTFTs (timed: from first scheduling, without the
    queueing) and the length probes, named with the machine it was measured on."""
    timed = options.concurrency == "timed"
    fit_of = (lambda s: s.prefill_ms) if timed else (lambda s: s.ttft_ms)
    off_fit = _median_per_request(off_runs, fit_of)
    measured = [(r.input_length, 0, ttft) for r, ttft in zip(records, off_fit, strict=True)]
    return replace(
        fit_ttft_model(measured + probes),
        probes=len(probes),
        engine_model=described.model,
        dtype=described.dtype,
        device=described.device,
        backend=described.backend,
        machine=described.machine,
        date=date.today().isoformat(),
    )


def _simulated(
    options: EngineOptions, tokens: Trace, on_runs: list[Run], kv_bytes, capacity, model
):
    """The simulator over the same tokens, pool and capacity, decoding what the engine decoded:
    (its report, the output token ids the engine generated)."""
    from pcache.replayer.simulate.driver import simulate

    generated = [sample.output_token_ids for sample in on_runs[0].samples]
    simulated_trace = replace(
        tokens,
        records=[
            replace(record, output_token_ids=output)
            for record, output in zip(tokens.records, generated, strict=True)
        ],
    )
    simulation = options.simulation_options(kv_bytes, capacity, model)
    return simulate(simulated_trace, simulation, keep_requests=True), generated


def _measurement(
    options: EngineOptions,
    capacity,
    runs: Runs,
    stats: tuple[RunStats, RunStats],
    predicted: ReplayReport,
    calibration,
    cut,
    described,
    stability,
) -> Measurement:
    """How the engine was measured, what it measured (cache on and off), and how the
    simulator's prediction compares."""
    timed = options.concurrency == "timed"
    on_runs, off_runs = runs.cache_on, runs.cache_off
    on_stats, off_stats = stats
    predicted_cached = [outcome.cached_tokens for outcome in predicted.per_request]
    measured_cached = [sample.cached_tokens for sample in on_runs[0].samples]
    consistent = all([s.cached_tokens for s in run.samples] == measured_cached for run in on_runs)
    mismatched = [
        index
        for index, (engine, simulator) in enumerate(
            zip(measured_cached, predicted_cached, strict=True)
        )
        if engine != simulator
    ]
    outputs_equal = all(
        [s.output_token_ids for s in on.samples] == [s.output_token_ids for s in off.samples]
        for on, off in zip(on_runs, off_runs, strict=True)
    )
    measured_p50 = on_stats.ttft_ms["p50"]
    predicted_p50 = predicted.ttft_ms["p50"]
    error = _ratio(predicted_p50, measured_p50)
    return Measurement(
        driver="engine",
        machine=described.machine,
        model=described.model,
        dtype=described.dtype,
        backend=described.backend,
        device=described.device,
        settings={
            "block_size": options.settings.block_size,
            "capacity_blocks": capacity,
            "hash_algo": options.settings.hash_algo,
            "max_num_batched_tokens": 8192,
            "threads": stability.threads,
            "time_scale": options.time_scale if timed else None,
            "seed": options.seed,
        },
        run_order=(
            "whole runs, cache on first in even repetitions"
            if timed
            else "interleaved per request, cache on first for even requests"
            " (odd ones in odd repetitions)"
        ),
        repeat=options.repeat,
        warmup=f"{options.warmup_rounds} rounds of the trace's shortest, median and longest"
        " prompt lengths (fresh tokens, 2 output tokens) on both engines, and a cache hit on"
        " the caching one; then empty pools",
        cache_on=on_stats,
        cache_off=off_stats,
        speedup_p50=_ratio(off_stats.ttft_ms["p50"], measured_p50),
        speedup_mean=_ratio(off_stats.ttft_ms["mean"], on_stats.ttft_ms["mean"]),
        outputs_equal=outputs_equal,
        cached_tokens_match=consistent and not mismatched,
        mismatched_requests=mismatched,
        predicted_ttft_ms=predicted.ttft_ms,
        predicted_speedup_p50=_ratio(predicted.ttft_uncached_ms["p50"], predicted_p50),
        prediction_error_p50=None if error is None else round(error - 1, 4),
        calibration=calibration.to_dict(),
        cut=cut,
        stability=stability,
    )


def _outcomes(records, runs: Runs, predicted: ReplayReport, generated) -> list[RequestOutcome]:
    """Each request as the cache-on engine served it, beside the cache-off TTFT and the
    simulator's cached tokens."""
    on_runs = runs.cache_on
    on_ttfts = _median_per_request(on_runs, lambda sample: sample.ttft_ms)
    off_ttfts = _median_per_request(runs.cache_off, lambda sample: sample.ttft_ms)
    predicted_cached = [outcome.cached_tokens for outcome in predicted.per_request]
    measured_cached = [sample.cached_tokens for sample in on_runs[0].samples]
    return [
        RequestOutcome(
            index=record.index,
            line=record.line,
            timestamp_ms=record.timestamp_ms,
            prompt_tokens=record.input_length,
            cached_tokens=measured_cached[position],
            ttft_ms=round(on_ttfts[position], 3),
            ttft_uncached_ms=round(off_ttfts[position], 3),
            start_ms=round(on_runs[0].samples[position].start_ms, 3),
            observed_cached_tokens=record.observed_cached_tokens,
            predicted_cached_tokens=predicted_cached[position],
            output_token_ids=generated[position],
        )
        for position, record in enumerate(records)
    ]


def _report(
    options: EngineOptions,
    tokens: Trace,
    capacity,
    kv_bytes,
    runs: Runs,
    probes,
    cut,
    described,
    stability,
):
    """The engine's replay report (the cache-on run, with the measurement beside it) and the
    TTFT calibration fitted to the cache-off run."""
    records = tokens.records
    on_runs = runs.cache_on
    calibration = _calibration(options, records, runs.cache_off, probes, described)
    predicted, generated = _simulated(
        options, tokens, on_runs, kv_bytes, capacity, calibration.model
    )
    on_stats, off_stats = _run_stats(on_runs, records), _run_stats(runs.cache_off, records)
    measurement = _measurement(
        options,
        capacity,
        runs,
        (on_stats, off_stats),
        predicted,
        calibration,
        cut,
        described,
        stability,
    )
    outcomes = _outcomes(records, runs, predicted, generated)
    measured_cached = [sample.cached_tokens for sample in on_runs[0].samples]
    num_hits = sum(1 for cached in measured_cached if cached)
    hit_tokens = sum(measured_cached)
    query_tokens = sum(record.input_length for record in records)
    peak_shared = on_runs[0].peak_shared_blocks
    report = ReplayReport(
        source=tokens.source,
        trace_format=tokens.format,
        policy="vllm",
        concurrency=options.concurrency,
        block_size=options.settings.block_size,
        capacity_blocks=capacity,
        requests=len(records),
        query_tokens=query_tokens,
        hit_tokens=hit_tokens,
        token_hit_rate=hit_tokens / query_tokens if query_tokens else 0.0,
        request_hit_rate=num_hits / len(records),
        hit_requests=num_hits,
        evicted_blocks=on_runs[0].evicted_blocks,
        peak_used_blocks=on_runs[0].peak_used_blocks,
        kv_bytes_per_token=kv_bytes,
        kv_bytes_saved=peak_shared * options.settings.block_size * kv_bytes,
        peak_shared_blocks=peak_shared,
        prefill_kv_bytes_reused=hit_tokens * kv_bytes,
        prefill_tokens_saved=hit_tokens,
        skipped_lines=tokens.num_skipped,
        reordered=tokens.reordered,
        ttft_ms=on_stats.ttft_ms,
        ttft_uncached_ms=off_stats.ttft_ms,
        observed_cached_tokens=None,
        mode="engine",
        ttft_model=calibration.model,
        measurement=measurement,
        per_request=outcomes if options.keep_requests else [],
    )
    return report, calibration
