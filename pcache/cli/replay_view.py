"""Views of a replay result: the rich report, JSON, per-request JSONL, sweep chart, progress."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import orjson

from pcache.errors import InputError
from pcache.replay.report import ReplayReport
from pcache.replay.run import ReplayResult


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
    """Token hit rate and saved prefill tokens against cache size (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    capacities = [report.capacity_blocks or 0 for report in reports]
    figure, left = plt.subplots(figsize=(7, 4))
    left.plot(capacities, [r.token_hit_rate for r in reports], marker="o", color="tab:blue")
    left.set_xlabel(f"cache size (blocks of {reports[0].block_size} tokens)")
    left.set_ylabel("token hit rate", color="tab:blue")
    left.set_ylim(0, 1)
    right = left.twinx()
    right.plot(
        capacities, [r.prefill_tokens_saved for r in reports], marker="s", color="tab:orange"
    )
    right.set_ylabel("prefill tokens saved", color="tab:orange")
    left.set_title(f"{reports[0].source}: {reports[0].policy}, {reports[0].concurrency}")
    figure.tight_layout()
    _save(figure, path)


def plot_ttft_cdfs(path: str, report: ReplayReport) -> None:
    """Measured TTFT CDFs, cache on and cache off, of an engine replay (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 4))
    for label, values, color in (
        ("cache on", [r.ttft_ms for r in report.per_request], "tab:blue"),
        ("cache off", [r.ttft_uncached_ms for r in report.per_request], "tab:orange"),
    ):
        ordered = sorted(values)
        fractions = [(rank + 1) / len(ordered) for rank in range(len(ordered))]
        axes.step(ordered, fractions, where="post", label=label, color=color)
    axes.set_xlabel("TTFT (ms)")
    axes.set_ylabel("fraction of requests")
    axes.set_ylim(0, 1)
    axes.legend()
    measurement = report.measurement
    title = report.source if measurement is None else f"{report.source}: {measurement.model}"
    axes.set_title(f"{title}, {report.concurrency}")
    figure.tight_layout()
    _save(figure, path)


def _save(figure, path: str) -> None:
    import matplotlib.pyplot as plt

    try:
        figure.savefig(path, dpi=110)
    except OSError as failure:
        raise InputError(path, f"cannot write: {failure.strerror or failure}") from None
    finally:
        plt.close(figure)


def render(result: ReplayResult, format: str) -> None:
    from pcache.cli.console import stdout, write_json

    if format == "json":
        write_json(orjson.dumps(result.to_dict(), option=orjson.OPT_SORT_KEYS))
        return
    if result.sweep:
        _render_sweep(result)
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
    if report.observed_cached_tokens is not None:
        rows.append(("observed cached tokens", f"{report.observed_cached_tokens:,}", "from usage"))
    if report.skipped_lines:
        rows.append(("skipped lines", f"{report.skipped_lines:,}", "malformed"))
    from rich.table import Table

    table = Table(show_header=False, box=None, pad_edge=False)
    for _ in range(3):
        table.add_column()
    for row in rows:
        table.add_row(*row)
    stdout.print(table)


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


def _ttft(distribution: dict[str, float]) -> str:
    return f"{distribution['p50']:.1f} / {distribution['p90']:.1f} / {distribution['p99']:.1f} ms"


def _bytes(count: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(count) < 1024 or unit == "TiB":
            return f"{count:,.0f} {unit}" if unit == "B" else f"{count:,.1f} {unit}"
        count /= 1024
    return f"{count:.1f} TiB"
