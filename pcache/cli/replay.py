"""`pcache replay TRACE`: simulate a prefix cache (`--simulate`, default), measure it
through the built-in engine (`--engine cpu|gpu`, `--gpu`), cache on against cache off, or
against a live server (`--endpoint URL`)."""

from __future__ import annotations

from typing import Annotated

import typer

from pcache.cli import replay_endpoint as ep
from pcache.cli.options import (
    DEFAULT_BLOCK_SIZE,
    DEFAULT_DATE,
    DEFAULT_HASH_ALGO,
    DEFAULT_MODEL,
    DEFAULT_TOKENIZER,
    MAX_BLOCK_SIZE,
    MAX_CACHE_BLOCKS,
    MAX_CACHE_GB,
    MAX_TIME_SCALE,
    BlockSizeOpt,
    CacheSaltOpt,
    DateOpt,
    FormatOpt,
    HashAlgoOpt,
    TokenizerOpt,
    check_text_or_json,
    in_range,
)


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
            " deepseek.",
        ),
    ] = "vllm",
    cache_blocks: Annotated[
        int | None,
        typer.Option(
            "--cache-blocks",
            callback=in_range(1, MAX_CACHE_BLOCKS),
            help="Cache capacity in blocks (default: unlimited).",
        ),
    ] = None,
    cache_gb: Annotated[
        float | None,
        typer.Option(
            "--cache-gb",
            callback=in_range(above=0, maximum=MAX_CACHE_GB),
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
    decode_rate: Annotated[
        float,
        typer.Option(
            "--decode-rate",
            callback=in_range(above=0),
            help="Decode tokens/s per request (timed mode).",
        ),
    ] = 50.0,
    ttft_overhead_ms: Annotated[
        float | None,
        typer.Option(
            "--ttft-overhead-ms", callback=in_range(0), help="TTFT fixed overhead (ms; default 55)."
        ),
    ] = None,
    ttft_ms_per_token: Annotated[
        float | None,
        typer.Option(
            "--ttft-ms-per-token",
            callback=in_range(0),
            help="TTFT cost per uncached token (ms; default 0.05).",
        ),
    ] = None,
    ttft_ms_per_pair: Annotated[
        float | None,
        typer.Option(
            "--ttft-ms-per-pair",
            callback=in_range(0),
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
        typer.Option(
            "--repeat", callback=in_range(1, 1000), help="--engine: runs; medians reported."
        ),
    ] = 1,
    time_scale: Annotated[
        float,
        typer.Option(
            "--time-scale",
            callback=in_range(0, MAX_TIME_SCALE),
            help="--engine timed, --endpoint: multiply the trace's gaps between arrivals.",
        ),
    ] = 1.0,
    max_output_tokens: Annotated[
        int | None,
        typer.Option(
            "--max-output-tokens",
            callback=in_range(1),
            help="--engine, --endpoint: cap each output length.",
        ),
    ] = None,
    max_prompt_tokens: Annotated[
        int | None,
        typer.Option(
            "--max-prompt-tokens",
            callback=in_range(1),
            help="--engine: keep each prompt's first N tokens.",
        ),
    ] = None,
    warmup: Annotated[
        int,
        typer.Option(
            "--warmup",
            callback=in_range(0, 100),
            help="--engine: warm-up rounds before timing (0: none).",
        ),
    ] = 2,
    limit: Annotated[
        int | None,
        typer.Option("--limit", callback=in_range(1), help="Replay the first N requests only."),
    ] = None,
    capacity_sweep: Annotated[
        bool, typer.Option("--capacity-sweep", help="Replay at several cache sizes.")
    ] = False,
    sweep_points: Annotated[
        int,
        typer.Option(
            "--sweep-points", callback=in_range(2, 1000), help="Cache sizes in the sweep."
        ),
    ] = 8,
    plot: Annotated[
        str | None,
        typer.Option(
            "--plot", help="PNG: the sweep's chart, or --engine's TTFT CDFs (cache on, off)."
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
            callback=in_range(1, MAX_BLOCK_SIZE),
            help="Tokens per hash id (hash-id traces).",
        ),
    ] = None,
    tokenizer: TokenizerOpt = None,
    block_size: BlockSizeOpt = DEFAULT_BLOCK_SIZE,
    hash_algo: HashAlgoOpt = DEFAULT_HASH_ALGO,
    cache_salt: CacheSaltOpt = None,
    date: DateOpt = DEFAULT_DATE,
    progress: Annotated[
        bool | None, typer.Option("--progress/--no-progress", help="Progress bar on stderr.")
    ] = None,
    format: FormatOpt = "text",
    endpoint: ep.EndpointOpt = None,
    api: ep.ApiOpt = "completions",
    max_concurrency: ep.MaxConcurrencyOpt = None,
    rate: ep.RateOpt = None,
    burstiness: ep.BurstinessOpt = 1.0,
    compare_cache: ep.CompareCacheOpt = False,
    reset_cache: ep.ResetCacheOpt = False,
    api_key_env: ep.ApiKeyEnvOpt = None,
    timeout: ep.TimeoutOpt = 300.0,
    retries: ep.RetriesOpt = 2,
    ignore_eos: ep.IgnoreEosOpt = False,
    vocab_size: ep.VocabSizeOpt = None,
    no_server_metrics: ep.NoServerMetricsOpt = False,
) -> None:
    """Replay a trace against a prefix cache: simulated, or measured through the engine.

    Example: pcache replay samples/traces/mooncake_tiny.jsonl --cache-blocks 8
    """
    from pcache import replay
    from pcache.cli import replay_view
    from pcache.cli.console import warning
    from pcache.errors import UsageError
    from pcache.files import check_writable
    from pcache.replay.arguments import ReplayArguments
    from pcache.replay.ttft import TtftModel

    check_text_or_json(format)
    chosen = [
        name
        for name, on in (
            ("--simulate", simulate),
            ("--engine", engine is not None),
            ("--gpu", gpu),
            ("--endpoint", endpoint is not None),
        )
        if on
    ]
    if len(chosen) > 1:
        raise UsageError(
            f"give one of --simulate, --engine, --gpu and --endpoint, not {' and '.join(chosen)}"
        )
    if endpoint is not None:
        from pcache.replay.arguments import ReplayArguments
        from pcache.replay.endpoint_options import EndpointOptions

        for name, value in (
            ("--capacity-sweep", capacity_sweep),
            ("--plot", plot),
            ("--concurrency", concurrency != "serial"),
            ("--cache-gb", cache_gb),
            ("--calibration", calibration),
            ("--save-calibration", save_calibration),
            ("--repeat", repeat > 1),
        ):
            if value:
                raise UsageError(f"{name} does not apply to --endpoint")
        if policy != "vllm":
            raise UsageError("--endpoint predicts with the vLLM block pool: --policy vllm only")
        if output is not None:
            check_writable(output)
        options = EndpointOptions(
            url=endpoint,
            model=model or "",
            api=api,
            max_concurrency=max_concurrency,
            rate=rate,
            burstiness=burstiness,
            time_scale=time_scale,
            compare_cache=compare_cache,
            reset_cache=reset_cache,
            api_key_env=api_key_env,
            timeout_s=timeout,
            retries=retries,
            ignore_eos=ignore_eos,
            max_output_tokens=max_output_tokens,
            max_prompt_tokens=max_prompt_tokens,
            limit=limit,
            vocab_size=vocab_size,
            block_size=block_size,
            cache_blocks=cache_blocks,
            hash_algo=hash_algo,
            tokenizer=tokenizer or DEFAULT_TOKENIZER,
            scrape_metrics=not no_server_metrics,
        )
        arguments = ReplayArguments(
            trace=trace,
            mode="endpoint",
            block_size=block_size,
            hash_algo=hash_algo,
            tokenizer=tokenizer or DEFAULT_TOKENIZER,
            tokenizer_given=tokenizer is not None,
            cache_salt=cache_salt,
            date=date,
            strict=strict,
            trace_format=trace_format,
            trace_block_size=trace_block_size,
            endpoint=options,
        )
        ep.run(arguments, output, format)
        return
    mode = "simulate" if not (engine or gpu) else "engine"
    device = "gpu" if gpu else engine or "cpu"
    if engine is not None and engine not in ("cpu", "gpu"):
        raise UsageError(f"--engine must be cpu or gpu, got {engine!r}")
    if cache_blocks is not None and cache_gb is not None:
        raise UsageError("give --cache-blocks or --cache-gb, not both")
    if plot is not None and not capacity_sweep and mode == "simulate":
        raise UsageError("--plot needs --capacity-sweep (or --engine)")
    given_ttft = (ttft_overhead_ms, ttft_ms_per_token, ttft_ms_per_pair)
    if calibration is not None and any(value is not None for value in given_ttft):
        raise UsageError("give --calibration or the --ttft-* coefficients, not both")
    if mode == "simulate":
        for name, value in (
            ("--save-calibration", save_calibration),
            ("--repeat", repeat > 1),
            ("--time-scale", time_scale != 1.0),
            ("--max-output-tokens", max_output_tokens),
            ("--max-prompt-tokens", max_prompt_tokens),
        ):
            if value:
                raise UsageError(f"{name} applies to --engine and --gpu")
    elif calibration is not None:
        raise UsageError("--calibration applies to --simulate (--engine fits its own)")
    if model is None and mode == "engine":
        raise UsageError(
            "--engine needs --model: a preset (tiny, qwen3-0.6b, llama3-8b, ...) or"
            " a checkpoint directory"
        )
    for path in (output, plot, save_calibration):
        if path is not None:
            check_writable(path)
    defaults = TtftModel()
    arguments = ReplayArguments(
        trace=trace,
        mode=mode,
        device=device,
        policy=policy,
        cache_blocks=cache_blocks,
        cache_gb=cache_gb,
        model=model or DEFAULT_MODEL,
        concurrency=concurrency,
        decode_rate=decode_rate,
        ttft=TtftModel(
            defaults.overhead_ms if ttft_overhead_ms is None else ttft_overhead_ms,
            defaults.ms_per_token if ttft_ms_per_token is None else ttft_ms_per_token,
            defaults.ms_per_pair if ttft_ms_per_pair is None else ttft_ms_per_pair,
        ),
        calibration=calibration,
        save_calibration=save_calibration,
        capacity_sweep=capacity_sweep,
        sweep_points=sweep_points,
        keep_requests=output is not None or (plot is not None and mode == "engine"),
        strict=strict,
        trace_format=trace_format,
        trace_block_size=trace_block_size,
        tokenizer=tokenizer or DEFAULT_TOKENIZER,
        tokenizer_given=tokenizer is not None,
        block_size=block_size,
        hash_algo=hash_algo,
        cache_salt=cache_salt,
        date=date,
        repeat=repeat,
        time_scale=time_scale,
        max_output_tokens=max_output_tokens,
        max_prompt_tokens=max_prompt_tokens,
        limit=limit,
        warmup_rounds=warmup,
    )
    bar = replay_view.progress_bar(progress, format)
    with bar as advance:
        result = replay(arguments, progress=advance)
    for message in result.skipped[:5]:
        warning(f"skipped {message}")
    if len(result.skipped) > 5:
        warning(f"... {len(result.skipped) - 5} more malformed lines skipped")
    if result.reordered:
        warning(f"{trace}: timestamps out of order; requests were sorted by timestamp")
    if output is not None:
        replay_view.write_per_request(output, result.reports[-1])
    if plot is not None:
        if mode == "engine":
            replay_view.plot_ttft_cdfs(plot, result.reports[0])
        else:
            replay_view.plot_sweep(plot, result.reports)
    replay_view.render(result, format)
