"""`pcache replay TRACE`: simulate a prefix cache (`--simulate`, default), measure it
through the built-in engine (`--engine cpu|gpu`, `--gpu`), cache on against cache off, or
against a live server (`--endpoint URL`)."""

from __future__ import annotations

from typing import Annotated

import typer

from pcache.cli import replay_endpoint as ep
from pcache.cli.options import (
    DEFAULT_CHARS_PER_TOKEN,
    DEFAULT_DATE,
    DEFAULT_EXECUTOR,
    DEFAULT_HASH_ALGO,
    DEFAULT_MODEL,
    DEFAULT_ROUTER,
    CacheSaltOpt,
    CharsPerTokenOpt,
    ColumnOpt,
    DateOpt,
    ExecutorOpt,
    FormatOpt,
    HashAlgoOpt,
    JobsOpt,
    RayAddressOpt,
    ReplayBlockSizeOpt,
    ReplicasOpt,
    RouterOpt,
    RouterParamOpt,
    TokenizerOpt,
    check_text_or_json,
)
from pcache.defaults import DEFAULT_REQUEST_TIMEOUT_S


def replay_command(
    trace: Annotated[
        str, typer.Argument(help="Trace: request JSONL, Mooncake or Bailian hash-id JSONL, Batch.")
    ],
    simulate: Annotated[
        bool, typer.Option("--simulate", help="Simulate the cache, no model (the default).")
    ] = False,
    engine: Annotated[
        str | None,
        typer.Option(
            "--engine",
            help="Measure through the built-in engine, cache on and off: cpu (fp32, torch) or"
            " gpu (bf16, Triton).",
        ),
    ] = None,
    gpu: Annotated[bool, typer.Option("--gpu", help="The same as --engine gpu.")] = False,
    policy: Annotated[
        str,
        typer.Option(
            "--policy",
            help="vllm (block pool), radix (SGLang), or a provider: openai, anthropic, gemini,"
            " bedrock, deepseek.",
        ),
    ] = "vllm",
    cache_blocks: Annotated[
        int | None,
        typer.Option(
            "--cache-blocks",
            help="Cache capacity in blocks (default: unlimited).",
        ),
    ] = None,
    cache_gb: Annotated[
        float | None,
        typer.Option(
            "--cache-gb",
            help="Cache capacity in GiB of KV for --model.",
        ),
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            "-m",
            help="A preset (tiny, qwen3-0.6b, llama3-8b, qwen3-8b, gpt-oss-20b, ...), a model"
            f" directory or a config.json (--simulate default: {DEFAULT_MODEL}).",
        ),
    ] = None,
    concurrency: Annotated[
        str,
        typer.Option(
            "--concurrency", help="serial (one request at a time) or timed (requests overlap)."
        ),
    ] = "serial",
    publish_blocks: Annotated[
        str | None,
        typer.Option(
            "--publish-blocks",
            help="Timed: a request's blocks are hits from its admission (scheduled, vLLM) or"
            " from the end of its prefill (prefilled, SGLang). Default: the --policy's engine.",
        ),
    ] = None,
    prefill_slots: Annotated[
        int | None,
        typer.Option(
            "--prefill-slots",
            help="Timed: at most N prefills at once per engine; the others wait their turn"
            " (default: no limit).",
        ),
    ] = None,
    decode_rate: Annotated[
        float,
        typer.Option(
            "--decode-rate",
            help="Decode tokens/s per request (timed mode).",
        ),
    ] = 50.0,
    ttft_overhead_ms: Annotated[
        float | None,
        typer.Option("--ttft-overhead-ms", help="TTFT fixed overhead (ms; default 55)."),
    ] = None,
    ttft_ms_per_token: Annotated[
        float | None,
        typer.Option(
            "--ttft-ms-per-token",
            help="TTFT cost per uncached token (ms; default 0.05).",
        ),
    ] = None,
    ttft_ms_per_pair: Annotated[
        float | None,
        typer.Option(
            "--ttft-ms-per-pair",
            help="TTFT cost per query-key pair (ms; default 1e-6).",
        ),
    ] = None,
    calibration: Annotated[
        str | None,
        typer.Option(
            "--calibration", help="--simulate: the TTFT model fitted by --save-calibration."
        ),
    ] = None,
    save_calibration: Annotated[
        str | None,
        typer.Option(
            "--save-calibration",
            help="--engine: write the TTFT model fitted on the cache-off run (JSON).",
        ),
    ] = None,
    repeat: Annotated[
        int,
        typer.Option("--repeat", help="--engine: runs; medians reported."),
    ] = 1,
    time_scale: Annotated[
        float,
        typer.Option(
            "--time-scale",
            help="--engine timed, --endpoint: multiply the trace's gaps between arrivals.",
        ),
    ] = 1.0,
    max_output_tokens: Annotated[
        int | None,
        typer.Option(
            "--max-output-tokens",
            help="--engine, --endpoint: cap each output length.",
        ),
    ] = None,
    max_prompt_tokens: Annotated[
        int | None,
        typer.Option(
            "--max-prompt-tokens",
            help="--engine: keep each prompt's first N tokens.",
        ),
    ] = None,
    warmup: Annotated[
        int,
        typer.Option(
            "--warmup",
            help="--engine: warm-up rounds before timing (0: none).",
        ),
    ] = 2,
    threads: Annotated[
        int | None,
        typer.Option(
            "--threads", help="--engine: torch threads for the model (default: physical cores)."
        ),
    ] = None,
    limit: Annotated[
        int | None,
        typer.Option("--limit", help="Replay the first N requests only."),
    ] = None,
    capacity_sweep: Annotated[
        bool, typer.Option("--capacity-sweep", help="Replay at several cache sizes.")
    ] = False,
    sweep_points: Annotated[
        int,
        typer.Option("--sweep-points", help="Cache sizes in the sweep."),
    ] = 8,
    replicas: ReplicasOpt = None,
    router: RouterOpt = DEFAULT_ROUTER,
    router_param: RouterParamOpt = None,
    chars_per_token: CharsPerTokenOpt = DEFAULT_CHARS_PER_TOKEN,
    plot: Annotated[
        str | None,
        typer.Option(
            "--plot",
            help="PNG: the capacity sweep's or the --replicas/--router grid's chart, or"
            " --engine's TTFT CDFs (cache on, off).",
        ),
    ] = None,
    output: Annotated[
        str | None, typer.Option("--output", "-o", help="Write one JSON line per request here.")
    ] = None,
    strict: Annotated[
        bool, typer.Option("--strict", help="Fail on the first malformed line.")
    ] = False,
    trace_format: Annotated[
        str, typer.Option("--trace-format", help="auto, mooncake, bailian or requests.")
    ] = "auto",
    trace_block_size: Annotated[
        int | None,
        typer.Option(
            "--trace-block-size",
            help="Tokens per hash id (hash-id traces).",
        ),
    ] = None,
    tokenizer: TokenizerOpt = None,
    block_size: ReplayBlockSizeOpt = None,
    hash_algo: HashAlgoOpt = DEFAULT_HASH_ALGO,
    cache_salt: CacheSaltOpt = None,
    date: DateOpt = DEFAULT_DATE,
    progress: Annotated[
        bool | None, typer.Option("--progress/--no-progress", help="Progress bar on stderr.")
    ] = None,
    format: FormatOpt = "text",
    column: ColumnOpt = None,
    jobs: JobsOpt = None,
    executor: ExecutorOpt = DEFAULT_EXECUTOR,
    ray_address: RayAddressOpt = None,
    endpoint: ep.EndpointOpt = None,
    api: ep.ApiOpt = None,
    max_concurrency: ep.MaxConcurrencyOpt = None,
    rate: ep.RateOpt = None,
    burstiness: ep.BurstinessOpt = 1.0,
    compare_cache: ep.CompareCacheOpt = False,
    reset_cache: ep.ResetCacheOpt = False,
    api_key_env: ep.ApiKeyEnvOpt = None,
    timeout: ep.TimeoutOpt = 300.0,
    request_timeout: ep.RequestTimeoutOpt = DEFAULT_REQUEST_TIMEOUT_S,
    retries: ep.RetriesOpt = 2,
    ignore_eos: ep.IgnoreEosOpt = False,
    vocab_size: ep.VocabSizeOpt = None,
    no_server_metrics: ep.NoServerMetricsOpt = False,
    kv_events: ep.KVEventsOpt = None,
    replica_metrics: ep.ReplicaMetricsOpt = None,
) -> None:
    """Replay a trace against a prefix cache: simulated, or measured through the engine.

    Example: pcache replay samples/traces/mooncake_tiny.jsonl --cache-blocks 8
    """
    from pcache import replay
    from pcache.cli import replay_view
    from pcache.cli.console import warning
    from pcache.files import check_writable
    from pcache.prompt.reading.tables import with_columns
    from pcache.replayer.fleet.options import fleet_from_flags
    from pcache.replayer.run import replay_options

    check_text_or_json(format)
    (trace,) = with_columns([trace], column)
    options = replay_options(
        _mode(simulate=simulate, engine=engine, gpu=gpu, endpoint=endpoint),
        tokenizer=tokenizer,
        block_size=block_size,
        hash_algo=hash_algo,
        cache_salt=cache_salt,
        date=date,
        jobs=jobs,
        executor=executor,
        ray_address=ray_address,
        trace_format=trace_format,
        trace_block_size=trace_block_size,
        strict=strict,
        cache_blocks=cache_blocks,
        limit=limit,
        keep_requests=output is not None or plot is not None,
        model=model,
        policy=policy,
        cache_gb=cache_gb,
        concurrency=concurrency,
        decode_rate=decode_rate,
        publish_blocks=publish_blocks,
        prefill_slots=prefill_slots,
        ttft=_ttft(ttft_overhead_ms, ttft_ms_per_token, ttft_ms_per_pair),
        calibration=calibration,
        capacity_sweep=capacity_sweep,
        sweep_points=sweep_points,
        fleet=fleet_from_flags(replicas, router, router_param, chars_per_token),
        device="gpu" if gpu else engine,
        save_calibration=save_calibration,
        repeat=repeat,
        time_scale=time_scale,
        max_output_tokens=max_output_tokens,
        max_prompt_tokens=max_prompt_tokens,
        warmup_rounds=warmup,
        threads=threads,
        url=endpoint,
        api=api,
        max_concurrency=max_concurrency,
        rate=rate,
        burstiness=burstiness,
        compare_cache=compare_cache,
        reset_cache=reset_cache,
        api_key_env=api_key_env,
        timeout_s=timeout,
        request_timeout_s=request_timeout,
        retries=retries,
        ignore_eos=ignore_eos,
        vocab_size=vocab_size,
        scrape_metrics=not no_server_metrics,
        kv_events=kv_events,
        replica_metrics=ep.replica_urls(replica_metrics),
    )
    if plot is not None:
        options.check_plot()
    for path in (output, plot):
        if path is not None:
            check_writable(path)
    if options.mode == "endpoint":
        ep.run(trace, options, output, format)
        return
    bar = replay_view.progress_bar(progress, format)
    with bar as advance:
        result = replay(trace, options, progress=advance)
    for message in result.skipped[:5]:
        warning(f"skipped {message}")
    if len(result.skipped) > 5:
        warning(f"... {len(result.skipped) - 5} more malformed lines skipped")
    if result.reordered:
        warning(f"{trace}: timestamps out of order; requests were sorted by timestamp")
    for report in result.reports:
        stability = getattr(report.measurement, "stability", None)
        for message in stability.warnings if stability is not None else []:
            warning(message)
    if output is not None:
        replay_view.write_per_request(output, result.reports[-1])
    if plot is not None:
        if options.mode == "engine":
            replay_view.plot_ttft_cdfs(plot, result.reports[0])
        else:
            replay_view.plot_sweep(plot, result.reports)
    replay_view.render(result, format)


def _mode(**chosen: bool | str | None) -> str:
    """The driver the flags choose (`--simulate`, `--engine`, `--gpu`, `--endpoint`)."""
    from pcache.errors import UsageError

    given = [f"--{name}" for name, value in chosen.items() if value not in (None, False)]
    if len(given) > 1:
        raise UsageError(
            f"give one of --simulate, --engine, --gpu and --endpoint, not {' and '.join(given)}"
        )
    if chosen["endpoint"] is not None:
        return "endpoint"
    return "engine" if chosen["engine"] is not None or chosen["gpu"] else "simulate"


def _ttft(overhead_ms: float | None, ms_per_token: float | None, ms_per_pair: float | None):
    """The TTFT model of the `--ttft-*` flags given (the others at their defaults), or None."""
    if overhead_ms is None and ms_per_token is None and ms_per_pair is None:
        return None
    from pcache.replayer.ttft import TtftModel

    defaults = TtftModel()
    return TtftModel(
        defaults.overhead_ms if overhead_ms is None else overhead_ms,
        defaults.ms_per_token if ms_per_token is None else ms_per_token,
        defaults.ms_per_pair if ms_per_pair is None else ms_per_pair,
    )
