"""`pcache replay TRACE --endpoint URL`: the replay against a live server, and its view."""

from __future__ import annotations

import orjson
import typer


def write_per_request(path: str, report) -> None:
    """One JSON line per request of the measured pass, written atomically."""
    from pcache.files import write_atomically

    rows = report.endpoint.request_rows()
    write_atomically(path, [orjson.dumps(row, option=orjson.OPT_SORT_KEYS) + b"\n" for row in rows])


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"


MAX_DIFFERENCES = 5
"""Requests whose cached tokens differ from the prediction, listed in text (all in JSON)."""
LATENCY_LABELS = {
    "ttft": "TTFT (first content)",
    "first_chunk": "first chunk",
    "tpot": "TPOT",
    "itl": "ITL",
    "e2el": "end-to-end",
}


def render(result, format: str) -> None:
    """`result`: the endpoint replay's `ReplayResult`; text from its report's fields."""
    from rich.markup import escape
    from rich.table import Table

    from pcache.cli.console import stdout, warning, write_json

    if format == "json":
        data = result.to_dict()
        write_json(orjson.dumps(data, option=orjson.OPT_SORT_KEYS | orjson.OPT_SERIALIZE_NUMPY))
        return
    measurement = result.reports[0].endpoint
    measured, totals = measurement.measured, measurement.totals()
    head = (
        f"[bold]{escape(measurement.endpoint)}[/] ({measurement.server_kind or 'unknown server'})"
    )
    stdout.print(f"{head}, model {escape(measurement.model_id)}, {measurement.backend} API")
    stdout.print(
        f"{totals.completed} of {measurement.num_prompts} requests completed in"
        f" {round(measured.duration, 6):.2f} s (max concurrency"
        f" {measurement.max_concurrency or 'unlimited'}, peak"
        f" {measured.max_concurrent_requests}; arrivals: {measurement.request_rate_label})"
        + (" [bold red]interrupted[/]" if measured.interrupted else "")
    )
    table = Table(box=None, pad_edge=False)
    table.add_column("ms")
    for name in ("mean", "p50", "p90", "p95", "p99"):
        table.add_column(name, justify="right")
    latencies = measured.latencies()
    for name, label in LATENCY_LABELS.items():
        latency = latencies[name]
        row = [latency.mean, latency.p50, latency.p90, latency.p95, latency.p99]
        table.add_row(label, *map(_ms, row))
    stdout.print(table)
    stdout.print(
        f"throughput: {totals.request_throughput or 0:.2f} requests/s,"
        f" {totals.output_throughput or 0:,.1f} output tokens/s"
    )
    predicted = totals.predicted_cached_tokens
    if totals.cached_tokens is None:
        why = "no request completed" if not totals.completed else "not reported by the server"
        stdout.print(
            f"cached tokens: {why}; predicted {predicted:,}"
            f" of {sum(measurement.input_lens):,} prompt tokens"
        )
        if measurement.cached_tokens_hint:
            warning(f"the server reports no cached tokens: {measurement.cached_tokens_hint}")
    else:
        mismatched = measurement.mismatched_requests()
        verdict = "match" if totals.cached_tokens_match else f"differ in {len(mismatched)} requests"
        serial = ""
        if measurement.prediction_mode == "timed":
            serial = f", serial {sum(measurement.predicted_serial_cached_tokens):,}"
        stdout.print(
            f"cached tokens: server {totals.cached_tokens:,}, predicted {predicted:,}"
            f" ({measurement.prediction_mode}{serial}) of {totals.input_tokens:,} prompt tokens"
            f" ({verdict})"
        )
        _render_misses(measurement)
    stdout.print(f"  prediction: {escape(measurement.prediction_assumptions)}", style="dim")
    stdout.print(
        f"  block size {measurement.block_size}: {escape(measurement.block_size_source)}",
        style="dim",
    )
    metrics = measurement.server_metrics
    if metrics is not None:
        delta, client = metrics["delta"], metrics["client"]
        parts = [f"{key} +{value:,.0f}" for key, value in sorted(delta.items())]
        stdout.print(f"server /metrics: {', '.join(parts) or 'no known counters'}")
        cached = client["cached_tokens"]
        stdout.print(
            f"  client totals: prompt_tokens {client['prompt_tokens']:,}, cached_tokens"
            f" {'unknown' if cached is None else f'{cached:,}'}"
        )
    elif measurement.server_metrics_note:
        stdout.print(f"server /metrics: {escape(measurement.server_metrics_note)}", style="dim")
    comparison = measurement.compare_cache
    if comparison is not None:
        on, off = comparison.cache_on, comparison.cache_off
        speedup = comparison.speedup_median_ttft
        stdout.print(
            f"cache comparison ({comparison.strategy}): TTFT p50 {_ms(off['p50_ttft_ms'])}"
            f" ms off → {_ms(on['p50_ttft_ms'])} ms on"
            + (f" ({speedup:.2f}×)" if speedup else "")
            + f", p90 {_ms(off['p90_ttft_ms'])} → {_ms(on['p90_ttft_ms'])} ms"
        )
        stdout.print(f"  {escape(comparison.note)}", style="dim")
    failures = measured.failures()
    if failures.count:
        codes = ", ".join(f"{code}: {count}" for code, count in failures.status_codes.items())
        warning(f"{failures.count} requests failed ({codes}); first: {failures.first_error}")
    _render_fleet(measurement)
    for note in measurement.notes:
        warning(note)


def _render_misses(measurement) -> None:
    """One line of the server's missed tokens by reason, and the requests that differ."""
    from rich.markup import escape

    from pcache.cli.console import stdout
    from pcache.replayer.miss_reasons import summary_line

    reasons = measurement.miss_reasons
    if not reasons or reasons["total"] is None:
        return
    stdout.print(f"  {summary_line(reasons['total'])}")
    differences = reasons["differences"]
    for difference in differences[:MAX_DIFFERENCES]:
        stdout.print(f"  request {difference['request']}: {escape(difference['why'])}", style="dim")
    if len(differences) > MAX_DIFFERENCES:
        stdout.print(
            f"  ... {len(differences) - MAX_DIFFERENCES} more (--format json:"
            " prediction_differences)",
            style="dim",
        )


def _render_fleet(measurement) -> None:
    from rich.markup import escape

    from pcache.cli.console import stdout

    check = measurement.kv_events
    if check is not None:
        received = ", ".join(f"{kind} {count:,}" for kind, count in check.events_received.items())
        stdout.print(
            f"KV events from {escape(check.endpoint)}: {received or 'none'} in"
            f" {check.batches:,} batches; blocks matched {check.blocks_matched:,}"
            f" (stored {check.stored_matched:,}, removed {check.removed_matched:,}),"
            f" mismatches {check.mismatches:,}"
        )
        stdout.print(
            f"  compared by {check.compared_by}: stored missing {check.stored_missing},"
            f" unexpected {check.stored_unexpected}; removed missing {check.removed_missing},"
            f" unexpected {check.removed_unexpected}; hashes compared {check.hashes_compared:,},"
            f" differ {check.hashes_differ}; unresolved {check.unresolved_blocks};"
            f" generated-token blocks {check.generated_blocks}",
            style="dim",
        )
        for note in check.notes:
            stdout.print(f"  {escape(note)}", style="dim")
    if measurement.replicas is not None:
        for replica in measurement.replicas:
            if replica.error is not None:
                stdout.print(f"replica {escape(replica.url)}: {escape(replica.error)}")
                continue
            rate = replica.hit_rate
            stdout.print(
                f"replica {escape(replica.url)}: requests {_count(replica.requests)},"
                f" prefix hits {_count(replica.hit_tokens)} of {_count(replica.prompt_tokens)}"
                f" prompt tokens" + (f" ({rate:.3f})" if rate is not None else "")
            )


def _count(value: float | None) -> str:
    return "unknown" if value is None else f"{value:,.0f}"


def run(trace: str, options, output: str | None, format: str, redact: bool = False) -> None:
    """Replay against the server (`options`, `EndpointOptions`), show the report, also after
    Ctrl-C (`redact`: the server's error texts as their shapes)."""
    from pcache import replay
    from pcache.cli.console import stderr, warning

    if format == "text" and stderr.is_terminal:
        stderr.print(f"replaying {trace} against {options.shown} ...", markup=False)
    result = replay(trace, options, redact=redact)
    for message in result.skipped[:5]:
        warning(f"skipped {message}")
    if len(result.skipped) > 5:
        warning(f"... {len(result.skipped) - 5} more malformed lines skipped")
    report = result.reports[0]
    if output is not None:
        write_per_request(output, report)
    render(result, format)
    measurement = report.endpoint
    if measurement.measured.interrupted:
        raise typer.Exit(130)
    if measurement.num_prompts and not measurement.totals().completed:
        raise typer.Exit(1)  # nothing was measured
