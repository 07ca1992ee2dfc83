"""Input prices by model family, read from `pcache/data/prices.json`, and which family prices a
request's model.

A model is priced by the longest family it is, or that it extends by a date, a version or a
`-latest`/`-preview` suffix, once any `provider/` path or Bedrock `region.vendor.` prefix is
taken off: `gpt-4o-2024-08-06` is `gpt-4o`, `us.anthropic.claude-sonnet-4-20250514-v1:0` is
`claude-sonnet-4`, and `gpt-4o-mini` is `gpt-4o-mini`, never `gpt-4o`. A name no family
matches has no price: pcache never guesses one.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import orjson

from pcache.errors import ConfigError, OptionError

PER_TOKENS = 1_000_000
"""Prices are per million tokens."""
SUFFIX = re.compile(
    r"(?:-\d{4}-\d{2}-\d{2}|-\d{8}|-\d{2}-\d{2}|-\d{2}-\d{4}|-latest|-preview|-exp"
    r"|-v\d+(?::\d+)?|:\d+|@[\w.-]+)*"
)
"""What may follow a family's name in a model's: dates, versions, latest, preview."""
PRICE_KEYS = ("input", "cached_input", "cache_write")
BEDROCK_PREFIX = re.compile(
    r"^(?:[a-z]{2,4}\.)?(?:anthropic|meta|amazon|mistral|cohere|deepseek)\."
)
"""A Bedrock model id's region (`us.`, `eu.`, `apac.`) and vendor (`anthropic.`)."""


@dataclass(frozen=True, slots=True)
class Price:
    """One family's input prices, USD per million tokens."""

    family: str
    input: float
    cached_input: float
    cache_write: float | None = None
    """A 5-minute cache write, where the provider charges one instead of `input`."""
    source: str = ""
    as_of: str = ""

    @property
    def miss(self) -> float:
        """What a prompt token the cache did not serve costs: a cache write where the provider
        charges one (the cache writes what it misses), else the input price."""
        return self.input if self.cache_write is None else self.cache_write

    def cost(self, prompt_tokens: int, cached_tokens: int) -> float:
        """USD for `prompt_tokens` of which the cache served `cached_tokens`."""
        missed = prompt_tokens - cached_tokens
        return (cached_tokens * self.cached_input + missed * self.miss) / PER_TOKENS

    def as_dict(self) -> dict[str, Any]:
        return {
            "family": self.family,
            "input": self.input,
            "cached_input": self.cached_input,
            "cache_write": self.cache_write,
            "source": self.source,
            "as_of": self.as_of,
        }


@cache
def price_data() -> dict[str, Any]:
    return orjson.loads((resources.files("pcache") / "data" / "prices.json").read_bytes())


@cache
def table() -> dict[str, Price]:
    """Every family of the data file (family names are unique across providers)."""
    found: dict[str, Price] = {}
    for provider in price_data()["providers"].values():
        for family, entry in provider["families"].items():
            assert family not in found, family
            found[family] = Price(
                family,
                float(entry["input"]),
                float(entry["cached_input"]),
                None if entry.get("cache_write") is None else float(entry["cache_write"]),
                entry.get("source", provider["source"]),
                entry.get("as_of", provider["as_of"]),
            )
    return found


def family_price(family: str) -> Price:
    """The data file's price of `family` (an exact family name)."""
    return table()[family]


def base_name(model: str) -> str:
    """The model's name without a `provider/` path or a Bedrock `region.vendor.` prefix."""
    name = model.rsplit("/", 1)[-1].lower()
    vendor = BEDROCK_PREFIX.match(name)
    return name[vendor.end() :] if vendor else name


def match(model: str | None, families: dict[str, Price]) -> Price | None:
    """The price of the longest family of `families` that `model` is or extends, or None."""
    if not model:
        return None
    name = base_name(model)
    best: Price | None = None
    for family, price in families.items():
        longer = best is None or len(family) > len(best.family)
        if longer and name.startswith(family) and SUFFIX.fullmatch(name, len(family)):
            best = price
    return best


def parse_prices(value: Any, where: str) -> dict[str, Price]:
    """`[tool.pcache.prices]`: `MODEL = {input = X, cached_input = Y, cache_write = Z}` (USD
    per million tokens; `cache_write` only where the provider charges cache writes)."""
    if not isinstance(value, dict):
        raise ConfigError(f"{where} must be a table of MODEL = {{input = X, cached_input = Y}}")
    prices = {}
    for model, entry in value.items():
        if not isinstance(entry, dict):
            raise ConfigError(f"{where} {model} must be a table {{input = X, cached_input = Y}}")
        unknown = sorted(set(entry) - set(PRICE_KEYS))
        if unknown:
            raise ConfigError(
                f"{where} {model}: unknown key(s) {', '.join(unknown)}"
                f" (known: {', '.join(PRICE_KEYS)})"
            )
        for key in ("input", "cached_input"):
            if key not in entry:
                raise ConfigError(f"{where} {model}: {key} is missing (USD per million tokens)")
        for key, number in entry.items():
            if isinstance(number, bool) or not isinstance(number, (int, float)):
                raise ConfigError(f"{where} {model}.{key} must be a number, got {number!r}")
            if not math.isfinite(number) or number < 0:
                raise ConfigError(f"{where} {model}.{key} must be a finite number >= 0")
        name = base_name(model)
        prices[name] = Price(
            name,
            float(entry["input"]),
            float(entry["cached_input"]),
            None if "cache_write" not in entry else float(entry["cache_write"]),
            source=where,
            as_of="",
        )
    return prices


class PriceBook:
    """The price of each request's model: `forced` for every request (`--price MODEL`), else
    the longest family of `custom` (`[tool.pcache.prices]`) that the model is, else of the data
    file; None where none is. Remembers the families used and the requests of each model
    without a price."""

    def __init__(self, custom: dict[str, Price] | None = None, forced: str | None = None):
        self.custom = dict(custom or {})
        self.forced = None if forced is None else self.named(forced)
        self.priced: dict[str, Price] = {}
        """The prices of the requests seen, by family."""
        self.missing: dict[str, int] = {}
        """Model (`""`: none named) -> requests with no price."""
        self._found: dict[str | None, Price | None] = {}

    def named(self, model: str) -> Price:
        """The price `--price MODEL` names (a family, or a model one family prices)."""
        found = match(model, self.custom) or match(model, table())
        if found is None:
            raise OptionError(
                "price",
                f"{model!r}: no family of pcache/data/prices.json or [tool.pcache.prices] prices"
                f" it (families: {', '.join(sorted(table()))})",
            )
        return found

    def of(self, model: str | None) -> Price | None:
        """The price of a request for `model` (counted)."""
        if model in self._found:
            found = self._found[model]
        else:
            found = self.forced or match(model, self.custom) or match(model, table())
            self._found[model] = found
        if found is None:
            self.missing[model or ""] = self.missing.get(model or "", 0) + 1
        else:
            self.priced[found.family] = found
        return found
