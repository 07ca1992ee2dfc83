"""Lint's money (`pcache.rules.money`) in words: the lines the text formats and the report
print."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pcache.rules.money import MONTH_DAYS

if TYPE_CHECKING:
    from pcache.cache.prices import Price
    from pcache.rules.money import Money, MoneySummary

DOCS = "docs/pricing.md"


def usd(value: float) -> str:
    """Dollars to the cent from $1, to four places from a cent, else to six; `$0` for none."""
    size = abs(value)
    if size < 5e-7:
        return "$0"
    places = 2 if size >= 1 else 4 if size >= 0.01 else 6
    return f"{'-' if value < 0 else ''}${size:,.{places}f}"


def rate(value: float) -> str:
    """A price per million tokens as its table writes it: `$2.50`, `$0.075`, `$0.125`."""
    whole, _, places = f"{value:,.4f}".partition(".")
    return f"${whole}.{places.rstrip('0').ljust(2, '0')}"


def price_words(price: Price) -> str:
    """`gpt-4o ($2.50 input, $1.25 cached per million tokens, as of 2025-11)`."""
    write = f", {rate(price.cache_write)} cache write" if price.cache_write is not None else ""
    when = f", as of {price.as_of}" if price.as_of else ", [tool.pcache.prices]"
    return (
        f"{price.family} ({rate(price.input)} input, {rate(price.cached_input)} cached{write}"
        f" per million tokens{when})"
    )


def span_words(milliseconds: float) -> str:
    """`2d 3h`, `52m 33s`, `4.2s`."""
    seconds = milliseconds / 1000
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, seconds = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    if days:
        return f"{days}d {hours}h"
    return f"{hours}h {minutes}m" if hours else f"{minutes}m {seconds}s"


def money_lines(money: MoneySummary) -> list[str]:
    """The run's cost as is and if fixed, its rate per day and month, or why none is shown."""
    if money.total is None:
        if not money.missing:
            return []
        models = ", ".join(
            f"{model or '(no model named)'} ({requests:,} request{'s' if requests != 1 else ''})"
            for model, requests in sorted(money.missing.items(), key=lambda m: (-m[1], m[0]))
        )
        return [
            f"Input cost not shown: no price for {models}; --price MODEL or"
            f" [tool.pcache.prices] gives one ({DOCS})."
        ]
    total = money.total
    prices = "; ".join(price_words(price) for price, _ in money.prices.values())
    forced = " for every request (--price)" if money.forced else ""
    share = f" ({total.saving / total.cost:.1%})" if total.cost else ""
    lines = [
        f"Input cost at {prices}{forced}: {usd(total.cost)} as is, {usd(total.cost_if_fixed)}"
        f" if fixed: the fixes save {usd(total.saving)}{share}."
    ]
    if total.day_factor is None:
        why = "the log spans no time" if money.span_ms == 0 else "some request has no timestamp"
        lines.append(f"No rate per day or month: {why}.")
        return lines
    day, month = total.rates(1), total.rates(MONTH_DAYS)
    assert money.span_ms is not None
    lines.append(
        f"At the log's rate ({span_words(money.span_ms)} from first to last request; a month is"
        f" {MONTH_DAYS} days): {usd(day['cost'])} a day as is, {usd(day['cost_if_fixed'])} if"
        f" fixed; {usd(month['cost'])} a month as is, the fixes save {usd(month['saving'])}."
    )
    return lines


def rule_saving(money: Money | None, code: str) -> str:
    """` saves $X` (and a month's) for the rule totals' row of `code`; "" without money."""
    if money is None:
        return ""
    saving = money.rules.get(code, 0.0)
    month = f" ({usd(saving * money.day_factor * MONTH_DAYS)}/month)" if money.day_factor else ""
    return f"  saves {usd(saving)}{month}"
