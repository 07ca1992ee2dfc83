"""`pcache replay TRACE --endpoint URL`: the options only a live server needs, and its view."""

from __future__ import annotations

from typing import Annotated

import orjson
import typer

EndpointOpt = Annotated[
    str | None,
    typer.Option(
        "--endpoint",
        help="Replay against a live OpenAI-compatible server (vLLM, SGLang, pcache serve, a"
        " hosted API), e.g. http://127.0.0.1:8000/v1.",
    ),
]
ApiOpt = Annotated[
    str,
    typer.Option(
        "--api",
        help="completions (token ids to /v1/completions), chat (the trace's messages to"
        " /v1/chat/completions) or anthropic (/v1/messages).",
    ),
]
MaxConcurrencyOpt = Annotated[
    int | None,
    typer.Option("--max-concurrency", min=1, help="Most requests in flight (default: no limit)."),
]
RateOpt = Annotated[
    float | None,
    typer.Option(
        "--rate",
        help="Requests/s (gamma arrivals, Poisson at --burstiness 1; inf: all at once);"
        " default: the trace's timestamps.",
    ),
]
BurstinessOpt = Annotated[
    float, typer.Option("--burstiness", help="With --rate: gamma shape (1: Poisson, <1 burstier).")
]
CompareCacheOpt = Annotated[
    bool,
    typer.Option(
        "--compare-cache", help="Two passes: the server's cache off (or cold) and on (or warm)."
    ),
]
ResetCacheOpt = Annotated[
    bool,
    typer.Option(
        "--reset-cache",
        help="Reset the server's prefix cache first (vLLM /reset_prefix_cache, SGLang"
        " /flush_cache).",
    ),
]
ApiKeyEnvOpt = Annotated[
    str | None,
    typer.Option(
        "--api-key-env",
        help="Environment variable holding the API key (default OPENAI_API_KEY, or"
        " ANTHROPIC_API_KEY with --api anthropic); the key is never printed.",
    ),
]
TimeoutOpt = Annotated[
    float, typer.Option("--timeout", help="Seconds to wait for a connection or a chunk.")
]
RetriesOpt = Annotated[
    int,
    typer.Option(
        "--retries", min=0, help="Retries of a request whose connection failed (never sent)."
    ),
]
IgnoreEosOpt = Annotated[
    bool, typer.Option("--ignore-eos", help="Ask the server to generate every output token.")
]
VocabSizeOpt = Annotated[
    int,
    typer.Option("--vocab-size", min=2, help="Hash-id traces: the token ids sent are below this."),
]
NoServerMetricsOpt = Annotated[
    bool, typer.Option("--no-server-metrics", help="Do not read the server's /metrics.")
]


def write_per_request(path: str, data: dict) -> None:
    """One JSON line per request of the measured pass, written atomically."""
    from pcache.files import write_atomically

    keys = ("ttfts", "first_chunk_times", "e2els", "input_lens", "output_lens")
    rows = []
    for index in range(data["num_prompts"]):
        row = {"request": index, **{key.removesuffix("s"): data[key][index] for key in keys}}
        row["itls"] = data["itls"][index]
        row["cached_tokens"] = data["cached_tokens"][index]
        row["predicted_cached_tokens"] = data["predicted_cached_tokens"][index]
        row["error"] = data["errors"][index]
        rows.append(orjson.dumps(row, option=orjson.OPT_SORT_KEYS) + b"\n")
    write_atomically(path, rows)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"


def render(data: dict, format: str) -> None:
    from rich.markup import escape
    from rich.table import Table

    from pcache.cli.console import stdout, warning, write_json

    if format == "json":
        write_json(orjson.dumps(data, option=orjson.OPT_SORT_KEYS | orjson.OPT_SERIALIZE_NUMPY))
        return
    done, total = data["completed"], data["num_prompts"]
    head = f"[bold]{escape(data['endpoint'])}[/] ({data['server_kind'] or 'unknown server'})"
    stdout.print(f"{head}, model {escape(data['model_id'])}, {data['backend']} API")
    stdout.print(
        f"{done} of {total} requests completed in {data['duration']:.2f} s"
        f" (max concurrency {data['max_concurrency'] or 'unlimited'}, peak"
        f" {data['max_concurrent_requests']}; arrivals: {data['request_rate']})"
        + (" [bold red]interrupted[/]" if data["interrupted"] else "")
    )
    table = Table(box=None, pad_edge=False)
    table.add_column("ms")
    for name in ("mean", "p50", "p90", "p95", "p99"):
        table.add_column(name, justify="right")
    labels = {
        "ttft": "TTFT (first content)",
        "first_chunk": "first chunk",
        "tpot": "TPOT",
        "itl": "ITL",
        "e2el": "end-to-end",
    }
    for key, label in labels.items():
        row = [data[f"mean_{key}_ms"]] + [data[f"p{p}_{key}_ms"] for p in (50, 90, 95, 99)]
        table.add_row(label, *map(_ms, row))
    stdout.print(table)
    stdout.print(
        f"throughput: {data['request_throughput'] or 0:.2f} requests/s,"
        f" {data['output_throughput'] or 0:,.1f} output tokens/s"
    )
    predicted = data["total_predicted_cached_tokens"]
    if data["total_cached_tokens"] is None:
        why = "no request completed" if not done else "not reported by the server"
        stdout.print(
            f"cached tokens: {why}; predicted {predicted:,}"
            f" of {sum(data['input_lens']):,} prompt tokens"
        )
        if data["cached_tokens_hint"]:
            warning(f"the server reports no cached tokens: {data['cached_tokens_hint']}")
    else:
        verdict = (
            "match"
            if data["cached_tokens_match"]
            else (f"differ in {len(data['mismatched_requests'])} requests")
        )
        stdout.print(
            f"cached tokens: server {data['total_cached_tokens']:,}, predicted {predicted:,}"
            f" of {data['total_input_tokens']:,} prompt tokens ({verdict})"
        )
    stdout.print(f"  prediction: {escape(data['prediction_assumptions'])}", style="dim")
    metrics = data["server_metrics"]
    if metrics is not None:
        delta, client = metrics["delta"], metrics["client"]
        parts = [f"{key} +{value:,.0f}" for key, value in sorted(delta.items())]
        stdout.print(f"server /metrics: {', '.join(parts) or 'no known counters'}")
        cached = client["cached_tokens"]
        stdout.print(
            f"  client totals: prompt_tokens {client['prompt_tokens']:,}, cached_tokens"
            f" {'unknown' if cached is None else f'{cached:,}'}"
        )
    elif data["server_metrics_note"]:
        stdout.print(f"server /metrics: {escape(data['server_metrics_note'])}", style="dim")
    comparison = data["compare_cache"]
    if comparison is not None:
        on, off = comparison["cache_on"], comparison["cache_off"]
        speedup = comparison["speedup_median_ttft"]
        stdout.print(
            f"cache comparison ({comparison['strategy']}): TTFT p50 {_ms(off['p50_ttft_ms'])}"
            f" ms off → {_ms(on['p50_ttft_ms'])} ms on"
            + (f" ({speedup:.2f}×)" if speedup else "")
            + f", p90 {_ms(off['p90_ttft_ms'])} → {_ms(on['p90_ttft_ms'])} ms"
        )
        stdout.print(f"  {escape(comparison['note'])}", style="dim")
    failures = data["failures"]
    if failures["count"]:
        codes = ", ".join(f"{code}: {count}" for code, count in failures["status_codes"].items())
        warning(f"{failures['count']} requests failed ({codes}); first: {failures['first_error']}")
    for note in data["notes"]:
        warning(note)


def run(trace: str, options, output: str | None, format: str) -> None:
    """Replay against the server (`options`, `EndpointOptions`), show the report, also after
    Ctrl-C."""
    from pcache import replay
    from pcache.cli.console import stderr, warning

    if format == "text" and stderr.is_terminal:
        stderr.print(f"replaying {trace} against {options.base} ...", markup=False)
    result = replay(trace, options)
    for message in result.skipped[:5]:
        warning(f"skipped {message}")
    if len(result.skipped) > 5:
        warning(f"... {len(result.skipped) - 5} more malformed lines skipped")
    data = result.to_dict()
    if output is not None:
        write_per_request(output, data)
    render(data, format)
    if data["interrupted"]:
        raise typer.Exit(130)
    if data["num_prompts"] and not data["completed"]:
        raise typer.Exit(1)  # nothing was measured
