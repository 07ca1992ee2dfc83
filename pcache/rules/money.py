"""Lint's token figures in money: the log's input cost as is and if fixed, what each rule's fix
saves, per group, and per day and month at the log's rate.

Each request is priced by its model's family (`pcache.cache.prices`): the tokens the cache
serves at the cached price, the others at the input price, or at the cache-write price where
the provider charges one (lint's cache writes what it misses). Lint keeps its token totals by
family as well (a `Groups` keyed by `--group-by`'s keys and the family), so each figure is
priced by the requests that pay it:

    cost         = cached tokens x cached_input + missed tokens x (cache_write or input)
    rule saving  = tokens re-prefilled x (miss - cached) - tokens its fix adds x cached

The rules' savings add up to the fixed log's saving (`cost - cost_if_fixed`) as their tokens
add up to its tokens: `unpaid` is what they exceed it by (`LintSummary.unpaid_tokens`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pcache.cache.prices import PER_TOKENS

if TYPE_CHECKING:
    from pcache.cache.prices import Price
    from pcache.rules.groups import GroupTotal

DAY_MS = 86_400_000
MONTH_DAYS = 30
RATE_ASSUMES = (
    "the log's requests repeat at the rate of its span (first to last timestamp); a month is"
    f" {MONTH_DAYS} days"
)
COST_ASSUMES = (
    "each request priced by its model's family: tokens the cache serves at the cached input"
    " price, the others at the input price, or at the cache-write price where the provider"
    " charges one (the cache writes what it misses); output tokens are not counted"
)
PRICE_KEY = "price"
"""The key of the family in the priced groups' rows."""
DIGITS = 6


@dataclass(slots=True)
class Money:
    """Input cost of some requests in USD: as is, if fixed, and what each rule's fix saves."""

    cost: float = 0.0
    cost_if_fixed: float = 0.0
    rules: dict[str, float] = field(default_factory=dict)
    day_factor: float | None = None
    """Days the log spans, inverted (None: no rate: a request without a timestamp, or one
    instant)."""

    @property
    def saving(self) -> float:
        return self.cost - self.cost_if_fixed

    @property
    def unpaid(self) -> float:
        """What the rules' savings exceed the fixed log's saving by."""
        return sum(self.rules.values()) - self.saving

    def add(self, row: GroupTotal, price: Price) -> None:
        """Add one priced row of totals (`Groups` keyed by the family too)."""
        self.cost += price.cost(row.prompt_tokens, row.reusable_tokens)
        self.cost_if_fixed += price.cost(row.prompt_tokens_if_fixed, row.reusable_tokens_if_fixed)
        missed = price.miss - price.cached_input
        for code in row.rule_tokens.keys() | row.rule_length.keys():
            tokens, added = row.rule_tokens.get(code, 0), row.rule_length.get(code, 0)
            saving = (tokens * missed - added * price.cached_input) / PER_TOKENS
            self.rules[code] = self.rules.get(code, 0.0) + saving

    def rates(self, days: float) -> dict[str, float]:
        """Cost, cost if fixed and saving over `days` at the log's rate."""
        assert self.day_factor is not None
        scale = self.day_factor * days
        return {
            "cost": _usd(self.cost * scale),
            "cost_if_fixed": _usd(self.cost_if_fixed * scale),
            "saving": _usd(self.saving * scale),
        }

    def as_dict(self) -> dict[str, object]:
        month = MONTH_DAYS * self.day_factor if self.day_factor is not None else None
        return {
            "cost": _usd(self.cost),
            "cost_if_fixed": _usd(self.cost_if_fixed),
            "saving": _usd(self.saving),
            "unpaid": _usd(self.unpaid),
            "per_day": self.rates(1) if self.day_factor is not None else None,
            "per_month": self.rates(MONTH_DAYS) if self.day_factor is not None else None,
            "rules": [
                {
                    "code": code,
                    "saving": _usd(saving),
                    "saving_per_month": None if month is None else _usd(saving * month),
                }
                for code, saving in sorted(self.rules.items(), key=lambda item: (-item[1], item[0]))
            ],
        }


NOT_SHOWN = {
    "cost": None,
    "cost_if_fixed": None,
    "saving": None,
    "unpaid": None,
    "per_day": None,
    "per_month": None,
    "rules": [],
}
"""`Money.as_dict`'s keys when some request has no price."""


def _usd(value: float) -> float:
    return round(value, DIGITS) + 0.0  # no -0.0


@dataclass(slots=True)
class MoneySummary:
    """The run's money: the prices used, the models no price was found for, and the totals
    (None, as every group's, when some request has no price)."""

    prices: dict[str, tuple[Price, int]] = field(default_factory=dict)
    """Family -> (its price, the requests it priced)."""
    missing: dict[str, int] = field(default_factory=dict)
    """Model (`""`: none named) -> requests without a price."""
    forced: str | None = None
    """The family `--price` forced on every request."""
    total: Money | None = None
    span_ms: float | None = None
    """First to last timestamp, when every request has one."""

    def as_dict(self) -> dict[str, object]:
        shown = self.total is not None
        return {
            "currency": "USD",
            "shown": shown,
            "assumes": COST_ASSUMES,
            "forced": self.forced,
            "prices": [
                {**price.as_dict(), "requests": requests}
                for price, requests in sorted(self.prices.values(), key=lambda p: -p[1])
            ],
            "missing_prices": [
                {"model": model or None, "requests": requests}
                for model, requests in sorted(self.missing.items(), key=lambda m: (-m[1], m[0]))
            ],
            "span_seconds": None if self.span_ms is None else round(self.span_ms / 1000, 3),
            "rate_assumes": RATE_ASSUMES if shown and self.span_ms else None,
            **(self.total.as_dict() if self.total is not None else NOT_SHOWN),
        }


def price_rows(
    rows: list[GroupTotal],
    families: dict[str, Price],
    missing: dict[str, int],
    forced: str | None,
) -> MoneySummary:
    """The money of lint's priced rows (each row's key holds its family under `PRICE_KEY`;
    `families`: each family's price); no total when some request has no price."""
    summary = MoneySummary(missing=dict(missing), forced=forced)
    for row in rows:
        family = row.key[PRICE_KEY]
        if family in families:
            price, requests = summary.prices.get(family, (families[family], 0))
            summary.prices[family] = (price, requests + row.requests)
    stamped = sum(row.timed_requests for row in rows)
    total_requests = sum(row.requests for row in rows)
    firsts = [row.first_ms for row in rows if row.first_ms is not None]
    lasts = [row.last_ms for row in rows if row.last_ms is not None]
    if total_requests and stamped == total_requests:
        summary.span_ms = max(lasts) - min(firsts)
    if missing or not rows:
        return summary
    summary.total = _money(rows, families, summary.span_ms)
    return summary


def _money(rows: list[GroupTotal], families: dict[str, Price], span_ms: float | None) -> Money:
    money = Money(day_factor=DAY_MS / span_ms if span_ms else None)
    for row in rows:
        money.add(row, families[row.key[PRICE_KEY]])
    return money


def group_money(
    groups: list[GroupTotal],
    rows: list[GroupTotal],
    families: dict[str, Price],
    span_ms: float | None,
) -> None:
    """Set each group's money from the priced rows of its requests."""
    by_key: dict[tuple, list[GroupTotal]] = {}
    for row in rows:
        key = tuple((k, v) for k, v in row.key.items() if k != PRICE_KEY)
        by_key.setdefault(key, []).append(row)
    for group in groups:
        mine = by_key.get(tuple(group.key.items()), [])
        group.money = _money(mine, families, span_ms)
