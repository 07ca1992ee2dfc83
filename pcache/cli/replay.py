"""`pcache replay TRACE --simulate`: hit rates, evictions, TTFT and cost of a workload."""

from __future__ import annotations

from typing import Annotated

import typer

from pcache.cli.options import (
    DEFAULT_BLOCK_SIZE,
    DEFAULT_DATE,
    DEFAULT_HASH_ALGO,
    DEFAULT_MODEL,
    DEFAULT_TOKENIZER,
    MAX_BLOCK_SIZE,
    MAX_CACHE_BLOCKS,
    MAX_CACHE_GB,
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
        bool, typer.Option("--simulate", help="Simulate the cache (no model, no GPU).")
    ] = False,
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
        str,
        typer.Option("--model", help="Model preset (llama-3-8b, qwen3-8b, ...) or config.json."),
    ] = DEFAULT_MODEL,
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
        float,
        typer.Option("--ttft-overhead-ms", callback=in_range(0), help="TTFT fixed overhead (ms)."),
    ] = 55.0,
    ttft_ms_per_token: Annotated[
        float,
        typer.Option(
            "--ttft-ms-per-token", callback=in_range(0), help="TTFT cost per uncached token (ms)."
        ),
    ] = 0.05,
    ttft_ms_per_pair: Annotated[
        float,
        typer.Option(
            "--ttft-ms-per-pair", callback=in_range(0), help="TTFT cost per query-key pair (ms)."
        ),
    ] = 1e-6,
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
        str | None, typer.Option("--plot", help="With --capacity-sweep: write a PNG chart.")
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
    tokenizer: TokenizerOpt = DEFAULT_TOKENIZER,
    block_size: BlockSizeOpt = DEFAULT_BLOCK_SIZE,
    hash_algo: HashAlgoOpt = DEFAULT_HASH_ALGO,
    cache_salt: CacheSaltOpt = None,
    date: DateOpt = DEFAULT_DATE,
    progress: Annotated[
        bool | None, typer.Option("--progress/--no-progress", help="Progress bar on stderr.")
    ] = None,
    format: FormatOpt = "text",
) -> None:
    """Simulate a trace against a prefix cache: hit rates, evictions, TTFT and cost.

    Example: pcache replay samples/traces/mooncake_tiny.jsonl --simulate --cache-blocks 8
    """
    from pcache.cli import replay_view
    from pcache.cli.console import warning
    from pcache.errors import UsageError
    from pcache.files import check_writable
    from pcache.simulation import ReplayArguments, run_replay

    check_text_or_json(format)
    if not simulate:
        raise UsageError("pass --simulate to replay against the simulated cache")
    if cache_blocks is not None and cache_gb is not None:
        raise UsageError("give --cache-blocks or --cache-gb, not both")
    if plot is not None and not capacity_sweep:
        raise UsageError("--plot needs --capacity-sweep")
    for path in (output, plot):
        if path is not None:
            check_writable(path)
    arguments = ReplayArguments(
        trace=trace,
        policy=policy,
        cache_blocks=cache_blocks,
        cache_gb=cache_gb,
        model=model,
        concurrency=concurrency,
        decode_rate=decode_rate,
        ttft=(ttft_overhead_ms, ttft_ms_per_token, ttft_ms_per_pair),
        capacity_sweep=capacity_sweep,
        sweep_points=sweep_points,
        keep_requests=output is not None,
        strict=strict,
        trace_format=trace_format,
        trace_block_size=trace_block_size,
        tokenizer=tokenizer,
        block_size=block_size,
        hash_algo=hash_algo,
        cache_salt=cache_salt,
        date=date,
    )
    bar = replay_view.progress_bar(progress, format)
    with bar as advance:
        result = run_replay(arguments, progress=advance)
    for message in result.skipped[:5]:
        warning(f"skipped {message}")
    if len(result.skipped) > 5:
        warning(f"... {len(result.skipped) - 5} more malformed lines skipped")
    if result.reordered:
        warning(f"{trace}: timestamps out of order; requests were sorted by timestamp")
    if output is not None:
        replay_view.write_per_request(output, result.reports[-1])
    if plot is not None:
        replay_view.plot_sweep(plot, result.reports)
    replay_view.render(result, format)
