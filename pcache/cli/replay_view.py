"""Views of a replay result: the rich report, JSON, per-request JSONL, sweep chart, progress."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence

import orjson

from pcache.errors import InputError
from pcache.replayer.report import ReplayReport
from pcache.replayer.run import ReplayResult


@contextlib.contextmanager
def progress_bar(enabled: bool | None, format: str) -> Iterator[Callable[[int], None] | None]:
    """A progress bar on stderr: on when asked, or by default when stderr is a terminal."""
    from pcache.cli.console import stderr

    if enabled is None:
        enabled = stderr.is_terminal and format == "text"
    if not enabled:
        yield None
        return
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    with Progress(
        SpinnerColumn(),
        TextColumn("replaying: {task.completed:,.0f} requests"),
        TimeElapsedColumn(),
        console=stderr,
        transient=True,
    ) as bar:
        task = bar.add_task("replay", total=None)
        yield lambda count: bar.advance(task, count)


def write_per_request(path: str, report: ReplayReport) -> None:
    """One JSON line per request, written atomically."""
    from pcache.files import write_atomically

    write_atomically(
        path,
        (
            orjson.dumps(outcome.to_dict(), option=orjson.OPT_SORT_KEYS) + b"\n"
            for outcome in report.per_request
        ),
    )


def plot_sweep(path: str, reports: list[ReplayReport]) -> None:
    """The capacity sweep's or the fleet grid's chart (PNG)."""
    from pcache.report.replay_plots import fleet_grid_png, sweep_png

    _write(path, fleet_grid_png(reports) if reports[0].fleet is not None else sweep_png(reports))


def plot_ttft_cdfs(path: str, report: ReplayReport) -> None:
    """An engine replay's TTFT CDFs, cache on and off (PNG)."""
    from pcache.report.replay_plots import ttft_cdfs_png

    _write(path, ttft_cdfs_png(report))


def _write(path: str, data: bytes) -> None:
    try:
        with open(path, "wb") as file:
            file.write(data)
    except OSError as failure:
        raise InputError(path, f"cannot write: {failure.strerror or failure}") from None


def warn(trace: str, result: ReplayResult) -> None:
    """What reading the trace and measuring noticed, on stderr: malformed lines skipped,
    timestamps reordered, an unstable measurement."""
    from pcache.cli.console import warning

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


def show(result: ReplayResult, mode: str, format: str, output: str | None, plot: str | None):
    """The result: per-request lines to `output`, the chart to `plot`, the report on stdout."""
    if output is not None:
        write_per_request(output, result.reports[-1])
    if plot is not None:
        if mode == "engine":
            plot_ttft_cdfs(plot, result.reports[0])
        else:
            plot_sweep(plot, result.reports)
    render(result, format)


def render(result: ReplayResult, format: str) -> None:
    from pcache.cli.console import stdout, write_json

    if format == "json":
        write_json(orjson.dumps(result.to_dict(), option=orjson.OPT_SORT_KEYS))
        return
    if result.sweep and result.reports[0].fleet is not None:
        _render_fleet_grid(result)
        return
    if result.sweep:
        _render_sweep(result)
        return
    if result.reports[0].measurement is not None:
        _render_measurement(result)
        return
    report = result.reports[0]
    capacity = "unlimited" if report.capacity_blocks is None else f"{report.capacity_blocks:,}"
    stdout.print(
        f"[bold]{report.source}[/] ({report.trace_format}): {report.requests:,} requests,"
        f" policy {report.policy}, {report.concurrency}, cache {capacity} blocks of"
        f" {report.block_size} tokens"
    )
    rows = [
        (
            "token hit rate",
            f"{report.token_hit_rate:.1%}",
            f"{report.hit_tokens:,} of {report.query_tokens:,} prompt tokens",
        ),
        (
            "request hit rate",
            f"{report.request_hit_rate:.1%}",
            f"{report.hit_requests:,} requests reused at least one block",
        ),
        ("prefill tokens saved", f"{report.prefill_tokens_saved:,}", ""),
        (
            "KV reused",
            _bytes(report.prefill_kv_bytes_reused),
            f"read from the cache instead of recomputed; {_bytes(report.kv_bytes_per_token)}"
            f" per token ({result.model})",
        ),
        (
            "KV memory shared",
            _bytes(report.kv_bytes_saved),
            f"peak: {report.peak_shared_blocks:,} block-table entries of running requests"
            " point at blocks another request holds"
            if report.concurrency == "timed"
            else "0 in serial replays (one request at a time; see --concurrency timed)",
        ),
        ("evicted blocks", f"{report.evicted_blocks:,}", ""),
        ("peak used blocks", f"{report.peak_used_blocks:,}", "blocks that held KV at once"),
        ("TTFT p50 / p90 / p99", _ttft(report.ttft_ms), "with the cache"),
        ("", _ttft(report.ttft_uncached_ms), "without"),
    ]
    if report.bill is not None:
        bill = report.bill
        rows.append(
            (
                "input cost",
                f"${bill.cost_with_cache:,.4f}",
                f"vs ${bill.cost_without_cache:,.4f} without caching"
                f" ({bill.saved_fraction:.1%} saved)",
            )
        )
        rows.extend(_minimum_rows(bill.min_tokens_by_model))
    if report.observed_cached_tokens is not None:
        rows.append(("observed cached tokens", f"{report.observed_cached_tokens:,}", "from usage"))
    if report.miss_reasons is not None:
        rows.append(_miss_row(report.miss_reasons))
    if report.skipped_lines:
        rows.append(("skipped lines", f"{report.skipped_lines:,}", "malformed"))
    rows.extend(_calibration_rows(report))
    stdout.print(_label_table(rows))
    if report.fleet is not None:
        _render_fleet(report)


def _miss_row(total: dict[str, int]) -> tuple[str, str, str]:
    """The missed tokens by reason, largest first."""
    from pcache.replayer.miss_reasons import reason_shares

    shares = reason_shares(total, counts=False)
    return ("missed tokens", f"{sum(total.values()):,}", shares or "none")


def _render_fleet(report: ReplayReport) -> None:
    """A fleet replay: the router's precision, the load imbalance, then each replica."""
    from rich.table import Table

    from pcache.cli.console import stdout

    fleet = report.fleet.to_dict()
    precision, imbalance = fleet["router_precision"], fleet["load_imbalance"]
    summary = _label_table()
    summary.add_row("router", fleet["router"], _parameters(fleet["router_parameters"]))
    summary.add_row(
        "load imbalance",
        f"{imbalance['requests']:.2f} / {imbalance['prompt_tokens']:.2f}",
        "max over mean requests / prompt tokens per replica (1.00: even)",
    )
    summary.add_row(
        "misrouted requests",
        f"{precision['misrouted_share']:.1%}",
        f"{precision['misrouted_requests']:,} sent away from the replica holding their longest"
        f" cached prefix; {precision['misrouted_tokens']:,} cached tokens lost",
    )
    stdout.print(summary)
    table = Table(title=f"{fleet['num_replicas']} replicas")
    for name in ("replica", "requests", "prompt tokens", "hit tokens", "token hit rate"):
        table.add_column(name, justify="right")
    table.add_column("evicted blocks", justify="right")
    for replica in fleet["replicas"]:
        table.add_row(
            str(replica["replica"]),
            f"{replica['requests']:,}",
            f"{replica['prompt_tokens']:,}",
            f"{replica['hit_tokens']:,}",
            f"{replica['token_hit_rate']:.1%}",
            f"{replica['evicted_blocks']:,}",
        )
    stdout.print(table)


def _parameters(values: dict) -> str:
    return ", ".join(f"{name}={value}" for name, value in values.items())


def _render_fleet_grid(result: ReplayResult) -> None:
    """A grid of routers x replica counts: one row each."""
    from rich.table import Table

    from pcache.cli.console import stdout

    first = result.reports[0]
    capacity = "unlimited" if first.capacity_blocks is None else f"{first.capacity_blocks:,}"
    table = Table(
        title=f"{first.source}: {first.policy}, {first.concurrency}, {capacity} blocks per replica"
    )
    for name in ("router", "N", "hit rate", "imbalance", "misrouted", "tokens lost", "TTFT p50"):
        table.add_column(name, justify="left" if name == "router" else "right")
    from pcache.replayer.fleet.report import grid_rows

    for row in grid_rows(result.reports):
        table.add_row(
            row.router,
            str(row.num_replicas),
            f"{row.token_hit_rate:.1%}",
            f"{row.request_imbalance:.2f}/{row.token_imbalance:.2f}",
            f"{row.misrouted_share:.1%}",
            f"{row.misrouted_tokens:,}",
            f"{row.ttft_p50_ms:.1f}",
        )
    table.caption = (
        "N: replicas; imbalance: max/mean requests and prompt tokens per replica; misrouted:"
        " requests sent away from the replica holding their longest cached prefix, and the"
        " cached tokens that cost; TTFT p50 in ms"
    )
    stdout.print(table)


def _render_measurement(result: ReplayResult) -> None:
    """A measured replay: cache on against cache off, then the calibrated prediction."""
    from rich.markup import escape
    from rich.table import Table

    from pcache.cli.console import stdout

    report = result.reports[0]
    measured = report.measurement
    assert measured is not None
    on, off = measured.cache_on, measured.cache_off
    stdout.print(
        f"[bold]{escape(report.source)}[/] ({report.trace_format}): {report.requests:,} requests,"
        f" {report.concurrency}, {escape(measured.model)} {measured.dtype} on {measured.device}"
        f" ({measured.backend}), {report.capacity_blocks:,} blocks of {report.block_size}"
        f" tokens per cache"
    )
    table = Table(box=None, pad_edge=False)
    table.add_column("")
    table.add_column("cache on", justify="right")
    table.add_column("cache off", justify="right")
    table.add_column("")
    rows = [("TTFT p50", "p50"), ("TTFT p90", "p90"), ("TTFT p99", "p99"), ("TTFT mean", "mean")]
    for label, key in rows:
        table.add_row(label, f"{on.ttft_ms[key]:,.1f} ms", f"{off.ttft_ms[key]:,.1f} ms", "")
    table.add_row(
        "prefill tokens computed",
        f"{on.prefill_tokens_computed:,}",
        f"{off.prefill_tokens_computed:,}",
        f"{report.prefill_tokens_saved:,} saved",
    )
    table.add_row(
        "peak KV blocks in use", f"{on.peak_used_blocks:,}", f"{off.peak_used_blocks:,}", ""
    )
    table.add_row(
        "prompt tokens/s",
        f"{on.prompt_tokens_per_s:,.0f}",
        f"{off.prompt_tokens_per_s:,.0f}",
        f"generated: {on.generated_tokens_per_s:,.1f} / {off.generated_tokens_per_s:,.1f}",
    )
    table.add_row("wall", f"{on.wall_s:,.2f} s", f"{off.wall_s:,.2f} s", "")
    stdout.print(table)
    summary = _label_table()
    summary.add_row(
        "speedup",
        f"{_times(measured.speedup_p50)} p50, {_times(measured.speedup_mean)} mean",
        f"medians of {measured.repeat} run{'s' if measured.repeat > 1 else ''};"
        f" {measured.run_order}",
    )
    stability = measured.stability
    if stability is not None:
        spread = (
            "n/a"
            if stability.pair_speedup_p50 is None
            else f"{_times(stability.pair_speedup_p50)} p50"
            f" (IQR {stability.pair_speedup_p25:.2f}-{stability.pair_speedup_p75:.2f}x)"
        )
        summary.add_row(
            "per-pair speedup",
            spread,
            f"{stability.hit_pairs} of {stability.pairs} pairs hit the cache;"
            f" {stability.repeated_pairs} measured again after a load"
            f" change ({stability.unsettled_pairs} still straddling); {stability.threads}"
            f" torch thread{'s' if stability.threads > 1 else ''}",
        )
        summary.add_row(
            "load average",
            f"{stability.load_average_before:.2f} -> {stability.load_average_after:.2f}",
            f"before and after the runs; other processes' running tasks"
            f" {stability.others_running_before} -> {stability.others_running_after}",
        )
    summary.add_row(
        "token hit rate",
        f"{report.token_hit_rate:.1%}",
        f"{report.hit_tokens:,} of {report.query_tokens:,} prompt tokens; requests:"
        f" {report.request_hit_rate:.1%}",
    )
    summary.add_row("evicted blocks", f"{report.evicted_blocks:,}", "")
    summary.add_row(
        "outputs equal", "yes" if measured.outputs_equal else "NO", "greedy, cache on vs off"
    )
    match = "yes" if measured.cached_tokens_match else "NO"
    detail = "engine vs simulator, every request"
    if measured.mismatched_requests:
        detail += f"; differ at {measured.mismatched_requests[:10]}"
    summary.add_row("cached tokens match", match, detail)
    model, fit = report.ttft_model, measured.calibration
    assert model is not None and fit is not None
    summary.add_row(
        "TTFT model (fit)",
        f"{model.overhead_ms:.3g} ms + {model.ms_per_token:.3g} ms/token"
        f" + {model.ms_per_pair:.3g} ms/pair",
        f"least squares on the cache-off run ({fit['samples'] - fit['probes']} requests,"
        f" {fit['probes']} length probes; rms error {fit['rms_error_ms']:.1f} ms)",
    )
    error = measured.prediction_error_p50
    summary.add_row(
        "predicted cache-on p50",
        f"{measured.predicted_ttft_ms['p50']:,.1f} ms",
        f"{'n/a' if error is None else f'{error:+.1%}'} vs measured; predicted speedup"
        f" {_times(measured.predicted_speedup_p50)}",
    )
    cut = measured.cut
    if cut.requests_dropped or cut.prompts_truncated or cut.outputs_capped:
        summary.add_row(
            "cut",
            f"{cut.requests_dropped:,} requests",
            f"{cut.prompts_truncated:,} prompts truncated ({cut.prompt_tokens_dropped:,} tokens),"
            f" {cut.outputs_capped:,} outputs capped ({cut.output_tokens_dropped:,} tokens)",
        )
    summary.add_row("machine", escape(measured.machine), "")
    stdout.print(summary)


def _label_table(rows: Sequence[tuple[str, str, str]] = ()):
    """A headerless table of (label, figure, note) rows."""
    from rich.table import Table

    table = Table(show_header=False, box=None, pad_edge=False)
    for _ in range(3):
        table.add_column()
    for row in rows:
        table.add_row(*row)
    return table


def _times(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}x"


def _render_sweep(result: ReplayResult) -> None:
    from rich.table import Table

    from pcache.cli.console import stdout

    first = result.reports[0]
    table = Table(title=f"{first.source}: {first.policy}, {first.concurrency}")
    for name in (
        "cache blocks",
        "token hit rate",
        "request hit rate",
        "prefill tokens saved",
        "evicted blocks",
        "TTFT p50 ms",
    ):
        table.add_column(name, justify="right")
    for report in result.reports:
        table.add_row(
            f"{report.capacity_blocks:,}",
            f"{report.token_hit_rate:.1%}",
            f"{report.request_hit_rate:.1%}",
            f"{report.prefill_tokens_saved:,}",
            f"{report.evicted_blocks:,}",
            f"{report.ttft_ms['p50']:.1f}",
        )
    stdout.print(table)
    calibration = _calibration_rows(first)
    if calibration:
        stdout.print(_label_table(calibration))


def _calibration_rows(report: ReplayReport) -> list[tuple[str, str, str]]:
    """The TTFT model of a replay predicted with a calibration file, where that file was
    measured, and what differs from this run."""
    from rich.markup import escape

    used, model = report.calibration, report.ttft_model
    if used is None or model is None:
        return []
    rows = [
        (
            "TTFT model",
            f"{model.overhead_ms:.3g} ms + {model.ms_per_token:.3g} ms/token"
            f" + {model.ms_per_pair:.3g} ms/pair",
            f"from {escape(used.path)} (sha256 {used.sha256[:12]})",
        ),
        (
            "calibration",
            escape(used.engine_model or "?"),
            escape(
                f"{used.dtype or '?'} on {used.device or '?'} ({used.backend or '?'});"
                f" {used.machine or 'machine unknown'}; {used.date or 'date unknown'};"
                f" {used.samples:,} samples ({used.probes:,} length probes),"
                f" rms error {used.rms_error_ms:.1f} ms"
            ),
        ),
    ]
    rows.extend(("note", "", escape(note)) for note in used.notes)
    return rows


def _ttft(distribution: dict[str, float]) -> str:
    return f"{distribution['p50']:.1f} / {distribution['p90']:.1f} / {distribution['p99']:.1f} ms"


def _bytes(count: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(count) < 1024 or unit == "TiB":
            return f"{count:,.0f} {unit}" if unit == "B" else f"{count:,.1f} {unit}"
        count /= 1024
    return f"{count:.1f} TiB"


MAX_MODEL_ROWS = 5


def _minimum_rows(by_model: dict) -> list[tuple[str, str, str]]:
    """The minimum prefix assumed per model (the first few models, then how many more)."""
    rows = []
    for number, (model, chosen) in enumerate(sorted(by_model.items())):
        if number == MAX_MODEL_ROWS:
            more = f"{len(by_model) - MAX_MODEL_ROWS:,} more models"
            rows.append(("", more, "see --format json"))
            break
        source = chosen["from"]
        origin = "the profile's default (model not listed)" if source == "default" else source
        label = "minimum prefix" if number == 0 else ""
        rows.append((label, f"{chosen['min_tokens']:,}", f"{model or '(no model)'}: {origin}"))
    return rows
