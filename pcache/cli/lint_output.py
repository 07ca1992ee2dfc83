"""Rendering of lint results: full and concise here, json, github and sarif from
`pcache.rules.formats` (the only printing of `lint`)."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator

from pcache.cli.console import stderr, stdout, write_json
from pcache.rules import formats as lint_formats
from pcache.rules.money_words import money_lines, rule_saving, usd
from pcache.rules.observed import TOLERANCE_SHARE


@contextlib.contextmanager
def progress(enabled: bool) -> Iterator:
    """A request counter on stderr, only for humans at a terminal."""
    if not enabled or not sys.stderr.isatty():
        yield None
        return
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    with Progress(
        SpinnerColumn(),
        TextColumn("linting {task.completed} requests"),
        TimeElapsedColumn(),
        console=stderr,
        transient=True,
    ) as bar:
        task = bar.add_task("lint", total=None)
        yield lambda count: bar.advance(task, count)


def print_rules(format: str) -> None:
    from pcache.rules import REGISTRY

    rules = [module.RULE for module in REGISTRY]
    if format == "json":
        write_json(lint_formats.rules_json(rules))
        return
    for rule in rules:
        fix = " [fix]" if rule.fix_availability != "none" else ""
        default = "default" if rule.default else "opt-in"
        stdout.print(
            f"{rule.code}  {rule.name:<32} {rule.severity:<8} {default:<8} {rule.summary}{fix}",
            markup=False,
            soft_wrap=True,
        )
    stdout.print(
        "\ndefault: on without --select; opt-in: --extend-select CODE or --select ALL"
        " (which also reports single-request hints).",
        markup=False,
    )


def print_explanation(rule, text: str, format: str) -> None:
    if format == "json":
        write_json(lint_formats.explanation_json(rule, text))
        return
    stdout.print(f"# {rule.name} ({rule.code})\n", markup=False)
    default = "yes" if rule.default else f"no (opt-in: --extend-select {rule.code})"
    stdout.print(
        f"Default severity: {rule.severity}. Fix: {rule.fix_availability}."
        f" On by default: {default}.\n",
        markup=False,
    )
    stdout.print(text, markup=False)


def print_report(report, format: str) -> None:
    from pcache.prompt.reading.tables import NEEDS_PYARROW

    skipped = report.summary.skipped_tables
    if skipped:
        stderr.print(
            f"note: {len(skipped)} table(s) skipped ({skipped[0]}"
            f"{', ...' if len(skipped) > 1 else ''}): {NEEDS_PYARROW}",
            markup=False,
            soft_wrap=True,
        )
    {
        "full": _full,
        "concise": _concise,
        "json": lambda report: write_json(lint_formats.report_json(report)),
        "github": _github,
        "sarif": lambda report: write_json(lint_formats.report_sarif(report)),
    }[format](report)


def _location(d) -> str:
    return f"{d.file}:{d.line}:{d.column}"


def _concise(report) -> None:
    for d in report.diagnostics:
        stdout.print(f"{_location(d)}: {d.code} {d.message}", markup=False, soft_wrap=True)
    _footer(report, brief=True)


def _full(report) -> None:
    from pcache.rules import PARSE_ERROR

    for d in report.diagnostics:
        fix = " [*]" if d.fixable else ""
        stdout.print(
            f"{_location(d)}: {d.code}{fix} [{d.severity}] {d.name}: {d.message}",
            markup=False,
            soft_wrap=True,
        )
        if d.code != PARSE_ERROR.code:  # an unreadable input has no place in a prompt
            where = [f"at {d.json_path or '(template)'}"]
            if d.token_position is not None:
                where.append(f"token {d.token_position}")
            where.append(f"{d.tokens_reprefilled:,} tokens re-prefilled")
            stdout.print("    " + " · ".join(where), markup=False, soft_wrap=True)
        if d.fix_title:
            stdout.print(f"    help: {d.fix_title}", markup=False, soft_wrap=True)
    _footer(report, brief=False)


def _count(number: int, noun: str, width: int = 0) -> str:
    """`1 finding`, `2 findings`, the number right-aligned in `width`."""
    return f"{number:>{width},} {noun}{'' if number == 1 else 's'}"


def _footer(report, brief: bool) -> None:
    summary = report.summary
    counts = {"error": 0, "warning": 0, "info": 0}
    for d in report.diagnostics:
        counts[d.severity] += 1
    total = len(report.diagnostics)
    if summary.fixed_files:
        stdout.print(f"Fixed {len(summary.fixed_files)} file(s).", markup=False)
    if total == 0:
        stdout.print(
            f"All checks passed ({_count(summary.requests, 'request')} in"
            f" {_count(summary.files, 'file')}).",
            markup=False,
        )
    else:
        parts = ", ".join(
            f"{n} {k}{'s' if n != 1 and k != 'info' else ''}" for k, n in counts.items() if n
        )
        fixable = sum(1 for d in report.diagnostics if d.fixable)
        hint = f" {fixable} fixable with --fix." if fixable else ""
        stdout.print(
            f"Found {_count(total, 'finding')} ({parts}) in {_count(summary.requests, 'request')},"
            f" {_count(summary.sessions, 'session')}.{hint}",
            markup=False,
        )
        if summary.findings_not_listed:
            stdout.print(
                f"{_count(summary.findings_not_listed, 'more finding')} not listed (the first"
                f" {total:,} are); the totals by rule count them all.",
                markup=False,
            )
    if brief:
        _money(summary)
        _observed(summary, brief)
        return
    if summary.rules:
        stdout.print(f"\nTokens re-prefilled by rule ({summary.profile} profile):", markup=False)
        for total_row in summary.rules:
            stdout.print(
                f"  {total_row.code} {total_row.name:<32}"
                f" {_count(total_row.count, 'finding', width=6):<15}"
                f" {total_row.tokens_reprefilled:>12,} tokens"
                + rule_saving(summary.money.total, total_row.code),
                markup=False,
                soft_wrap=True,
            )
    unattributed = summary.unattributed
    stdout.print(
        f"\nRe-prefilled: {summary.reprefilled_tokens:,} of {summary.prompt_tokens:,} tokens;"
        f" {summary.unattributed_tokens:,} explained by no finding"
        f" ({unattributed['first_request']:,} in the first request, with nothing to reuse;"
        f" {unattributed['new_content']:,} new content no earlier request had;"
        f" {unattributed['partial_blocks']:,} in partial blocks"
        + (
            f"; {unattributed['unreported']:,} in divergences"
            " not reported (rules not selected, or a template not yours)"
            if unattributed["unreported"]
            else ""
        )
        + ").",
        markup=False,
    )
    changed = summary.requests_changed_if_fixed
    stdout.print(
        f"Cacheable tokens ({summary.profile}, {summary.tokenizer}): "
        f"{summary.cacheable_ratio:.1%} as is ({summary.reusable_tokens:,} of"
        f" {summary.prompt_tokens:,}); {summary.cacheable_ratio_if_fixed:.1%} if fixed"
        f" ({summary.reusable_tokens_if_fixed:,} of {summary.prompt_tokens_if_fixed:,}: the"
        f" fixed log replayed, {_count(changed, 'request')} changed by the fix each finding"
        " names; --write-fixed writes it).",
        markup=False,
    )
    _money(summary)
    _groups(summary)
    _observed(summary, brief)


def _money(summary) -> None:
    """The input cost as is and if fixed, and per day and month (`pcache.rules.money`)."""
    for line in money_lines(summary.money):
        stdout.print(line, markup=False, soft_wrap=True)


SHOWN_GROUPS = 20
"""Groups the text view lists (the JSON output has them all)."""


def _groups(summary) -> None:
    """The totals per group (`--group-by`), most re-prefilled tokens first."""
    if not summary.group_by:
        return
    groups = summary.groups
    stdout.print(
        f"\nBy {', '.join(summary.group_by)} ({_count(len(groups), 'group')}, most re-prefilled"
        " first):",
        markup=False,
    )
    width = min(max(len(group.name) for group in groups), 48) if groups else 0
    for group in groups[:SHOWN_GROUPS]:
        row = group.as_dict()
        rules = [r for r in row["rules"] if r["tokens_reprefilled"]][:3]
        top = ", ".join(f"{r['code']} {r['tokens_reprefilled']:,}" for r in rules) or "-"
        money = group.money
        cost = (
            f"; {usd(money.cost)} as is, the fixes save {usd(money.saving)}"
            if money is not None
            else ""
        )
        stdout.print(
            f"  {row['name']:<{width}}  {_count(row['requests'], 'request', width=5):<15}"
            f" cacheable {row['cacheable_ratio']:>6.1%} as is,"
            f" {row['if_fixed']['cacheable_ratio']:>6.1%} if fixed;"
            f" {row['reprefilled_tokens']:>10,} re-prefilled ({top}){cost}",
            markup=False,
            soft_wrap=True,
        )
    if len(groups) > SHOWN_GROUPS:
        stdout.print(
            f"  ... {_count(len(groups) - SHOWN_GROUPS, 'more group')} (--format json lists all)",
            markup=False,
        )


def _observed(summary, brief: bool) -> None:
    """The log's cached-token counts beside the prediction (`pcache.rules.observed`)."""
    observed = summary.observed
    if not observed.requests:
        return
    stdout.print(
        f"{'' if brief else chr(10)}Observed cached tokens (the log's usage, in"
        f" {_count(observed.requests, 'request')}): {observed.observed_tokens:,}; predicted"
        f" reusable ({summary.profile} profile): {observed.predicted_tokens:,};"
        f" {_count(observed.disagreeing, 'request')} disagree by more than a block or"
        f" {TOLERANCE_SHARE:.0%} of the prompt ({observed.cached_less:,} cached less than"
        " predicted).",
        markup=False,
        soft_wrap=True,
    )
    if brief:
        return
    for entry in observed.worst:
        stdout.print(
            f"  {entry.request}: observed {entry.observed:,}, predicted {entry.predicted:,}"
            f" of {entry.prompt_tokens:,}: {entry.reason}",
            markup=False,
            soft_wrap=True,
        )


def _github(report) -> None:
    sys.stdout.write(lint_formats.github_annotations(report))
    sys.stdout.flush()
