"""The HTML page of a `Report`: one file, every chart and style inline, no network.

The Jinja2 template (`templates/report.html.j2`) lays out what this module hands it: the
summary figures (each with its exact value in a `data-value` attribute), the icicle, the
charts as SVG and the tables behind them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pcache.replayer.report import distribution_of
from pcache.report import charts
from pcache.report.build import Report
from pcache.report.icicle import layout
from pcache.rules.money import MONTH_DAYS
from pcache.rules.money_words import money_lines, usd
from pcache.rules.observed import AGREEMENT, KEEP_WORST

TIMELINE_BINS = 240


@dataclass(frozen=True, slots=True)
class Figure:
    key: str
    label: str
    text: str
    value: object
    note: str = ""


Charts = Callable[[], dict[str, str | None]]
"""What gives `draw_charts(chart_calls(report))`, e.g. as drawn elsewhere meanwhile."""


def render_page(report: Report, command: str, charts: Charts | None = None) -> str:
    """The page's HTML; `charts` is asked for the charts once the rest is ready."""
    import jinja2

    environment = jinja2.Environment(
        loader=jinja2.PackageLoader("pcache.report", "templates"),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
    )
    template = environment.get_template("report.html.j2")
    return template.render(**context(report, command, charts))


def _groups(lint) -> dict[str, Any] | None:
    """Lint's totals per group (`--group-by`), as its JSON output has them."""
    if lint is None or not lint.summary.group_by:
        return None
    return lint.summary.as_dict()["groups"]


def _money(lint) -> dict[str, Any] | None:
    """Lint's money: the lines the text output prints, and each rule's saving (None without a
    lint, or when the log has no request at all)."""
    if lint is None or not lint.summary.requests:
        return None
    money = lint.summary.money
    return {
        "lines": money_lines(money),
        "rules": (
            {code: round(saving, 6) for code, saving in money.total.rules.items()}
            if money.total is not None
            else None
        ),
    }


def context(report: Report, command: str, charts: Charts | None = None) -> dict[str, Any]:
    lint = report.lint
    rules = _rules(lint)
    findings = lint.diagnostics if lint else []
    values = {
        "report": report,
        "command": command,
        "figures": _figures(report),
        "top_rules": [rule for rule in rules if rule.tokens_reprefilled > 0][:3],
        "rules": rules,
        "findings": findings[: report.max_findings],
        "findings_total": len(findings),
        "rule_codes": sorted({d.code for d in findings}),
        "icicle": layout(report.tree),
        "tree": report.tree,
        "sweep": report.sweep,
        "calibration": report.settings["ttft_calibration"],
        "ttft": _ttft_rows(report),
        "fleet": _fleet_rows(report),
        "if_fixed_assumes": _if_fixed_assumes(lint),
        "observed": _observed(lint),
        "observed_assumes": AGREEMENT[0].upper() + AGREEMENT[1:],
        "observed_keep": KEEP_WORST,
        "groups": _groups(lint),
        "money": _money(lint),
        "usd": usd,
    }
    drawn = charts() if charts is not None else draw_charts(chart_calls(report))
    return {**values, **drawn}


ChartCall = tuple[Callable[..., str], tuple[Any, ...]]
"""A chart as the `charts` function that draws it and its arguments (plain values)."""


def chart_calls(report: Report) -> dict[str, ChartCall | None]:
    """The page's charts, by name, as calls (None: not drawn); the prefix tree is not read,
    so that they can be drawn while it grows."""
    return {
        "findings_chart": _findings_chart(_rules(report.lint)),
        "capacity_chart": _capacity_chart(report),
        "ttft_chart": _ttft_chart(report),
        "timeline_chart": _timeline_chart(report),
        "fleet_chart": _fleet_chart(report),
    }


def draw_charts(calls: dict[str, ChartCall | None]) -> dict[str, str | None]:
    """Each chart's SVG markup (None where not drawn)."""
    return {name: None if call is None else call[0](*call[1]) for name, call in calls.items()}


def _rules(lint) -> list:
    """Lint's rules, those that cost most first."""
    return sorted(lint.summary.rules, key=lambda t: -t.tokens_reprefilled) if lint else []


def _observed(lint):
    """Lint's `ObservedUsage` where some request of the log reports cached tokens, else None."""
    if lint is None or not lint.summary.observed.requests:
        return None
    return lint.summary.observed


def _figures(report: Report) -> list[Figure]:
    replay = report.replay
    figures = []
    lint = report.lint
    if lint is not None:
        summary = lint.summary
        figures += [
            Figure("requests", "Requests", f"{summary.requests:,}", summary.requests),
            Figure("sessions", "Sessions", f"{summary.sessions:,}", summary.sessions),
            Figure(
                "prompt_tokens",
                "Prompt tokens",
                f"{summary.prompt_tokens:,}",
                summary.prompt_tokens,
            ),
            Figure(
                "cacheable_ratio",
                "Cacheable as is",
                f"{summary.cacheable_ratio:.1%}",
                round(summary.cacheable_ratio, 6),
                f"{summary.reusable_tokens:,} tokens reused ({summary.profile})",
            ),
            Figure(
                "cacheable_ratio_if_fixed",
                "Cacheable if fixed",
                f"{summary.cacheable_ratio_if_fixed:.1%}",
                round(summary.cacheable_ratio_if_fixed, 6),
                _if_fixed_note(summary),
            ),
        ]
        figures += _money_figures(summary.money)
        data = summary.as_dict()
        if "unattributed_tokens" in data:  # re-prefilled tokens no finding explains
            unattributed = data["unattributed_tokens"]
            parts = data.get("unattributed_by_reason", {})
            note = ", ".join(f"{count:,} {kind.replace('_', ' ')}" for kind, count in parts.items())
            figures.append(
                Figure(
                    "unattributed_tokens",
                    "Re-prefilled, no finding",
                    f"{unattributed:,}",
                    unattributed,
                    f"of {data['reprefilled_tokens']:,} re-prefilled ({note})",
                )
            )
    else:
        figures += [
            Figure("requests", "Requests", f"{replay.requests:,}", replay.requests),
            Figure(
                "prompt_tokens", "Prompt tokens", f"{replay.query_tokens:,}", replay.query_tokens
            ),
        ]
    figures.append(
        Figure(
            "token_hit_rate",
            "Replay hit rate",
            f"{replay.token_hit_rate:.1%}",
            round(replay.token_hit_rate, 6),
            f"simulated {replay.policy}, unlimited cache, {replay.concurrency}",
        )
    )
    return figures


def _money_figures(money) -> list[Figure]:
    """The input cost as is and if fixed, and a month's saving at the log's rate."""
    total = money.total
    if total is None:
        return []
    figures = [
        Figure("cost", "Input cost as is", usd(total.cost), round(total.cost, 6), "USD"),
        Figure(
            "cost_if_fixed",
            "Input cost if fixed",
            usd(total.cost_if_fixed),
            round(total.cost_if_fixed, 6),
            f"saves {usd(total.saving)}",
        ),
    ]
    if total.day_factor is not None:
        month = total.rates(MONTH_DAYS)
        figures.append(
            Figure(
                "saving_per_month",
                "Saved per month",
                usd(month["saving"]),
                month["saving"],
                f"at the log's rate; {usd(month['cost'])} a month as is",
            )
        )
    return figures


def _if_fixed_note(summary) -> str:
    if_fixed = summary.as_dict().get("if_fixed")
    if isinstance(if_fixed, dict) and "prompt_tokens" in if_fixed:  # the fixed log's own size
        return f"{if_fixed['reusable_tokens']:,} of {if_fixed['prompt_tokens']:,} tokens"
    return f"{summary.reusable_tokens_if_fixed:,} tokens (upper bound)"


def _if_fixed_assumes(lint) -> str:
    if lint is None:
        return ""
    if_fixed = lint.summary.as_dict().get("if_fixed")
    if isinstance(if_fixed, dict) and "assumes" in if_fixed:
        return if_fixed["assumes"]
    return "every finding assumed fixed (an upper bound)"


def _findings_chart(rules) -> ChartCall | None:
    if not rules:
        return None
    return charts.findings_bars, (
        [f"{t.code} {t.name}" for t in rules],
        [t.tokens_reprefilled for t in rules],
        [t.count for t in rules],
    )


def _capacity_chart(report: Report) -> ChartCall | None:
    sweep = report.sweep
    if len(sweep) < 2:
        return None
    return charts.capacity_curve, (
        [r.capacity_blocks or 0 for r in sweep],
        [r.token_hit_rate for r in sweep],
        [r.prefill_tokens_saved for r in sweep],
        sweep[0].block_size,
        sweep[-1].capacity_blocks or 0,
    )


def _ttft_series(report: Report):
    """(label, cache-on values, cache-off values, measured) per source of TTFTs."""
    predicted = report.replay.per_request
    model = "calibrated" if report.settings["ttft_calibration"] else "default TTFT model"
    series = [
        (
            f"predicted (simulator, {model})",
            [o.ttft_ms for o in predicted],
            [o.ttft_uncached_ms for o in predicted],
            False,
        )
    ]
    for item in report.replay_files:
        kind = "measured" if item.measured else "predicted"
        series.append(
            (
                f"{kind} ({item.source})",
                [o.ttft_ms for o in item.outcomes],
                [o.ttft_uncached_ms for o in item.outcomes],
                item.measured,
            )
        )
    return series


def _ttft_rows(report: Report) -> list[dict[str, Any]]:
    rows = []
    files = [None, *report.replay_files]
    for (label, on, off, measured), item in zip(_ttft_series(report), files, strict=True):
        agreeing = None
        if item is not None and item.measured:
            agreeing = sum(o.cached_tokens == o.predicted_cached_tokens for o in item.outcomes)
        rows.append(
            {
                "label": label,
                "measured": measured,
                "requests": len(on),
                "on": distribution_of(on),
                "off": distribution_of(off),
                "cached_as_predicted": agreeing,
                "other_log": item is not None and len(on) != report.replay.requests,
            }
        )
    return rows


def _ttft_chart(report: Report) -> ChartCall | None:
    lines = []
    for source, (label, on, off, measured) in enumerate(_ttft_series(report)):
        if on:
            lines.append((f"cache on, {label}", on, True, source, measured))
            lines.append((f"cache off, {label}", off, False, source, measured))
    return (charts.ttft_cdfs, (lines,)) if lines else None


def _timeline_chart(report: Report) -> ChartCall | None:
    """The log's replay over time; the first replay file whose requests say why their tokens
    were missed (`replay --simulate --cache-blocks N -o FILE`) instead, coloured by reason."""
    from pcache.replayer.miss_reasons import REASONS, reason_tokens

    outcomes = report.replay.per_request
    explained = [item.outcomes for item in report.replay_files if item.explains_misses]
    if explained:
        outcomes = explained[0]
    if not outcomes:
        return None
    timed = len({o.timestamp_ms for o in outcomes}) > 1
    size = max(1, -(-len(outcomes) // TIMELINE_BINS))
    reasons = [reason_tokens(o.miss_reasons) for o in outcomes] if explained else None
    shown = [r for r in REASONS if reasons and any(r in tokens for tokens in reasons)]
    layers: dict[str, list[float]] = {reason: [] for reason in shown or ["recomputed"]}
    x, cached = [], []
    for start in range(0, len(outcomes), size):
        chunk = outcomes[start : start + size]
        first = chunk[0]
        x.append(first.timestamp_ms / 1000 if timed else start)
        cached.append(sum(o.cached_tokens for o in chunk) / len(chunk))
        if reasons is None:
            missed = sum(o.prompt_tokens - o.cached_tokens for o in chunk)
            layers["recomputed"].append(missed / len(chunk))
            continue
        for reason in shown:
            count = sum(tokens.get(reason, 0) for tokens in reasons[start : start + size])
            layers[reason].append(count / len(chunk))
    if len(x) == 1:  # one point draws nothing: give the step a width
        x.append(x[0] + 1)
        cached.append(cached[0])
        for values in layers.values():
            values.append(values[0])
    per = "request" if size == 1 else f"request (mean of {size})"
    label = "arrival time (s)" if timed else f"{per} in arrival order"
    return charts.timeline, (x, cached, list(layers.items()), label)


def _fleet_rows(report: Report):
    """The fleet grid's rows (`pcache.replayer.fleet.report.GridRow`), as the text table's."""
    if not report.fleet:
        return []
    from pcache.replayer.fleet.report import grid_rows

    return grid_rows(report.fleet)


def _fleet_chart(report: Report) -> ChartCall | None:
    if not report.fleet:
        return None
    from pcache.report.replay_plots import grid_points

    return charts.fleet_chart, (grid_points(report.fleet),)
