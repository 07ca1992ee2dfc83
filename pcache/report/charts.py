"""The page's charts, drawn by matplotlib as inline SVG (text kept as text, no fonts embedded).

Each function returns the markup of one `<svg>` that scales to its container; the page puts
the same figures in a table beside each chart. `capacity_figure` and `ttft_figure` are two of
those charts as figures, and `png` renders one as PNG (`pcache replay --plot`).
"""

from __future__ import annotations

import io
import re
from collections.abc import Sequence

from pcache.errors import ConfigError

ON = "#1f6f8b"  # cache on / reused
OFF = "#c8553d"  # cache off / recomputed
ACCENT = "#6b7a8f"
WIDTH_IN = 10.5  # at the page's 1,140 px the text is drawn near its 10 pt
_HEADER = re.compile(r"^.*?(<svg\b)", re.S)
_SIZE = re.compile(r'\s(width|height)="[^"]*pt"')
_METADATA = re.compile(r"\s*<metadata>.*?</metadata>", re.S)
_NAMESPACES = re.compile(r'\sxmlns(:xlink)?="[^"]*"')  # inline SVG in HTML needs none


def preload() -> None:
    """Import what the charts draw with now (about half a second), e.g. while another process
    computes what they show; without matplotlib, nothing (the first chart says so)."""
    try:
        import matplotlib.backends.backend_agg
        import matplotlib.figure
        import matplotlib.ticker  # noqa: F401
    except ImportError:
        pass


def _figure(width: float, height: float, rows: int = 1, columns: int = 1):
    """A new figure and its axes, on its own Agg canvas: no pyplot (its import and its
    figure manager cost more than the charts' drawing)."""
    try:
        import matplotlib
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise ConfigError(
            "pcache report draws its charts with matplotlib: pip install 'pcache[plot]'"
        ) from None
    matplotlib.rcParams.update(_STYLE)
    figure = Figure(figsize=(width, height))
    FigureCanvasAgg(figure)
    axes = figure.subplots(rows, columns)
    return figure, axes


_STYLE = {
    "svg.fonttype": "none",
    "text.parse_math": False,  # a file name with $ signs is text
    "svg.hashsalt": "pcache-report",
    "font.family": "sans-serif",
    "font.size": 10,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
}


def _ticker():
    from matplotlib import ticker

    return ticker


def _svg(figure, label: str) -> str:
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None})
    markup = _HEADER.sub(r"\1", buffer.getvalue(), count=1)
    markup = _SIZE.sub("", markup, count=2)
    markup = _METADATA.sub("", markup, count=1)
    markup = _NAMESPACES.sub("", markup, count=2)
    escaped = label.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;")
    return markup.replace("<svg", f'<svg role="img" aria-label="{escaped}"', 1)


def findings_bars(codes: Sequence[str], tokens: Sequence[int], counts: Sequence[int]) -> str:
    """Tokens re-prefilled per rule (horizontal bars), the finding count at each bar's end."""
    height = 0.9 + 0.26 * max(len(codes), 1)
    figure, axes = _figure(WIDTH_IN, height)
    rows = list(range(len(codes)))[::-1]
    axes.barh(rows, tokens, color=OFF, height=0.6)
    axes.set_yticks(rows, list(codes))
    top = max(tokens, default=0) or 1
    for row, value, count in zip(rows, tokens, counts, strict=True):
        noun = "finding" if count == 1 else "findings"
        axes.text(value + top * 0.01, row, f"{value:,} tok · {count} {noun}", va="center")
    axes.set_xlim(0, top * 1.35)
    axes.set_xlabel("prompt tokens re-prefilled (charged to the rule)")
    axes.grid(axis="y", visible=False)
    figure.tight_layout()
    return _svg(figure, "Tokens re-prefilled per rule; the table below lists the same figures.")


def capacity_curve(
    blocks: Sequence[int],
    hit_rates: Sequence[float],
    saved: Sequence[int],
    block_size: int,
    unlimited_blocks: int,
) -> str:
    """Token hit rate (left axis) and prefill tokens saved (right axis) against capacity."""
    figure = capacity_figure(blocks, hit_rates, saved, block_size, unlimited_blocks)
    return _svg(
        figure, "Token hit rate and prefill tokens saved against cache capacity; table below."
    )


def capacity_figure(
    blocks: Sequence[int],
    hit_rates: Sequence[float],
    saved: Sequence[int],
    block_size: int,
    unlimited_blocks: int,
):
    """`capacity_curve`'s matplotlib figure."""
    figure, left = _figure(WIDTH_IN, 3.8)
    left.plot(blocks, hit_rates, marker="o", color=ON, label="token hit rate")
    left.set_xscale("log")
    left.set_xticks(list(blocks), [f"{size:,}" for size in blocks])
    left.xaxis.set_minor_locator(_ticker().NullLocator())  # the capacities are the ticks
    left.set_ylim(0, 1)
    left.set_xlabel(f"cache capacity (blocks of {block_size} tokens, log scale)")
    left.set_ylabel("token hit rate", color=ON)
    right = left.twinx()
    right.plot(blocks, saved, marker="s", linestyle="--", color=ACCENT, label="tokens saved")
    right.set_ylabel("prefill tokens saved (dashed)", color=ACCENT)
    right.set_ylim(0, max(max(saved, default=0) * 1.1, 1))
    right.grid(False)
    right.spines["right"].set_visible(True)
    left.axvline(unlimited_blocks, color="#999", linewidth=1, linestyle=":")
    left.annotate(
        "never evicts",
        (unlimited_blocks, 0.03),
        ha="right",
        color="#666",
        xytext=(-4, 0),
        textcoords="offset points",
    )
    figure.tight_layout()
    return figure


def ttft_cdfs(series: Sequence[tuple[str, Sequence[float], bool, int, bool]]) -> str:
    """Step CDFs of TTFT: (label, values in ms, cache on, source number, measured) per series.
    Cache on is blue, off orange; the simulator's lines are solid (on) and dashed (off), a
    file's dash-dotted and dotted; measured lines are thick (readable without colour)."""
    figure = ttft_figure(series)
    return _svg(figure, "TTFT distributions with the cache on and off; percentiles in the table.")


def ttft_figure(series: Sequence[tuple[str, Sequence[float], bool, int, bool]]):
    """`ttft_cdfs`'s matplotlib figure."""
    figure, axes = _figure(WIDTH_IN, 3.8)
    for label, values, cache_on, source, measured in series:
        style = ("-", "--") if source == 0 else ("-.", ":")
        ordered, fractions = _cdf_steps(values)
        axes.step(
            ordered,
            fractions,
            where="post",
            label=label,
            color=ON if cache_on else OFF,
            linestyle=style[0] if cache_on else style[1],
            linewidth=2.4 if measured else 1.4,
        )
    axes.set_xlabel("time to first token (ms)")
    axes.set_ylabel("fraction of requests")
    axes.set_ylim(0, 1.02)
    axes.legend(loc="lower right", frameon=False)
    figure.tight_layout()
    return figure


def _cdf_steps(values: Sequence[float]) -> tuple[list[float], list[float]]:
    """The corners of a step CDF: each distinct value once, with the fraction of values at
    or below it (the line of every value's own step, without its zero-width steps), after
    the first value's own fraction."""
    ordered = sorted(values)
    count = len(ordered)
    xs: list[float] = []
    fractions: list[float] = []
    for rank, value in enumerate(ordered, 1):
        if xs and xs[-1] == value:
            fractions[-1] = rank / count
        else:
            xs.append(value)
            fractions.append(rank / count)
    if xs and fractions[0] != 1 / count:  # the line starts at the first value's own step
        xs.insert(0, xs[0])
        fractions.insert(0, 1 / count)
    return xs, fractions


LINE_STYLES = ("-", "--", "-.", ":")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "h")


def fleet_figure(lines: dict[str, Sequence[tuple[int, float, float, float]]]):
    """A fleet grid: token hit rate, requests max/mean and the misrouted share against the
    replica count, one line per router ((replicas, hit rate, imbalance, misrouted) points).
    Lines differ in marker and dash as well as colour (readable without colour)."""
    figure, axes = _figure(WIDTH_IN, 3.6, 1, 3)
    counts = sorted({point[0] for line in lines.values() for point in line})
    panels = (
        (1, "token hit rate", (0, 1)),
        (2, "load imbalance (requests max / mean)", None),
        (3, "misrouted requests (share)", (0, 1)),
    )
    for number, (name, line) in enumerate(lines.items()):
        for panel, (column, _, _) in zip(axes, panels, strict=True):
            panel.plot(
                [point[0] for point in line],
                [point[column] for point in line],
                marker=MARKERS[number % len(MARKERS)],
                linestyle=LINE_STYLES[number % len(LINE_STYLES)],
                label=name,
            )
    for panel, (_, label, limits) in zip(axes, panels, strict=True):
        if len(counts) > 1:
            panel.set_xscale("log", base=2)
        panel.set_xticks(counts, [str(count) for count in counts])
        panel.xaxis.set_minor_formatter(_ticker().NullFormatter())
        panel.set_xlabel("replicas")
        panel.set_title(label, fontsize=10)
        if limits is not None:
            panel.set_ylim(*limits)
        else:
            panel.set_ylim(bottom=0)
    axes[0].legend(loc="best", frameon=False, fontsize=8)
    figure.tight_layout()
    return figure


def fleet_chart(lines: dict[str, Sequence[tuple[int, float, float, float]]]) -> str:
    """`fleet_figure` as inline SVG."""
    return _svg(
        fleet_figure(lines),
        "Token hit rate, load imbalance and misrouted share against replicas, per router;"
        " the table below lists the same figures.",
    )


def png(figure, title: str | None = None) -> bytes:
    """A figure as PNG (`pcache replay --plot`), titled if `title` is given."""
    if title and len(figure.axes) > 2:  # panels have titles of their own
        figure.suptitle(title, fontsize=10)
        figure.tight_layout()
    elif title:
        figure.axes[0].set_title(title)
        figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110)
    return buffer.getvalue()


REASON_COLORS = {
    "never_cached": OFF,
    "evicted": "#e09f3e",
    "not_yet_published": "#9c6ade",
    "other_replica": "#3a7d44",
    "last_block": "#b8b8b8",
    "unexplained": "#222222",
}
"""The recomputed tokens' colour by reason (`pcache.replayer.miss_reasons.REASONS`)."""


def timeline(
    x: Sequence[float],
    cached: Sequence[float],
    recomputed: Sequence[tuple[str, Sequence[float]]],
    x_label: str,
) -> str:
    """Cached and recomputed prompt tokens per request (or per bin of requests), stacked;
    `recomputed`: one layer, or one per reason the tokens were missed, as (reason, tokens)."""
    figure, axes = _figure(WIDTH_IN, 3.4)
    if len(recomputed) == 1 and recomputed[0][0] == "recomputed":
        labels, colors = ["cached", "recomputed (hatched)"], [ON, OFF]
    else:
        labels = ["cached", *(f"missed: {reason.replace('_', ' ')}" for reason, _ in recomputed)]
        colors = [ON, *(REASON_COLORS.get(reason, ACCENT) for reason, _ in recomputed)]
    axes.stackplot(
        x,
        cached,
        *(tokens for _, tokens in recomputed),
        labels=labels,
        colors=colors,
        hatch=["", *("//" for _ in recomputed)],
        step="post",
    )
    axes.set_xlabel(x_label)
    axes.set_ylabel("prompt tokens")
    axes.legend(loc="lower left", bbox_to_anchor=(0, 1), ncol=min(len(labels), 4), frameon=False)
    figure.tight_layout()
    return _svg(figure, "Cached and recomputed prompt tokens per request over the log.")
