"""A replay's charts as PNG (`pcache replay --plot`), drawn by the report's chart functions
(`pcache.report.charts`) so that the file and the HTML report show the same figure."""

from __future__ import annotations

from pcache.replayer.report import ReplayReport


def sweep_png(reports: list[ReplayReport]) -> bytes:
    """A capacity sweep: token hit rate and prefill tokens saved against cache size. The sweep
    ends at the footprint of an unlimited cache."""
    from pcache.report import charts

    first = reports[0]
    figure = charts.capacity_figure(
        [report.capacity_blocks or 0 for report in reports],
        [report.token_hit_rate for report in reports],
        [report.prefill_tokens_saved for report in reports],
        first.block_size,
        reports[-1].capacity_blocks or 0,
    )
    return charts.png(figure, f"{first.source}: {first.policy}, {first.concurrency}")


def ttft_cdfs_png(report: ReplayReport) -> bytes:
    """An engine replay: the measured TTFT CDFs, cache on and cache off."""
    from pcache.report import charts

    figure = charts.ttft_figure(
        [
            ("cache on", [row.ttft_ms for row in report.per_request], True, 0, True),
            ("cache off", [row.ttft_uncached_ms for row in report.per_request], False, 0, True),
        ]
    )
    measurement = report.measurement
    title = report.source if measurement is None else f"{report.source}: {measurement.model}"
    return charts.png(figure, f"{title}, {report.concurrency}")


def grid_points(reports: list[ReplayReport]) -> dict[str, list[tuple[int, float, float, float]]]:
    """A fleet grid's chart points per router: (replicas, hit rate, imbalance, misrouted)."""
    from pcache.replayer.fleet.report import by_router, grid_rows

    return {
        router: [
            (row.num_replicas, row.token_hit_rate, row.request_imbalance, row.misrouted_share)
            for row in line
        ]
        for router, line in by_router(grid_rows(reports)).items()
    }


def fleet_grid_png(reports: list[ReplayReport]) -> bytes:
    """A fleet grid (`--replicas 1,2,4,8 --router a,b`): hit rate, imbalance and misrouted
    share against the replica count, one line per router."""
    from pcache.report import charts

    first = reports[0]
    capacity = "unlimited" if first.capacity_blocks is None else f"{first.capacity_blocks:,}"
    title = f"{first.source}: {first.policy}, {first.concurrency}, {capacity} blocks per replica"
    return charts.png(charts.fleet_figure(grid_points(reports)), title)
