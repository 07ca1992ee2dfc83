"""Cache profiles of engines and providers: the rules read from `pcache/data/providers.json`.

A profile answers one question: after request A was cached, how many prompt tokens of request B
does this cache reuse, given the length of their common token prefix?
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cache
from importlib import resources
from typing import Any

import orjson

from pcache.cache.prices import family_price
from pcache.defaults import PROFILE_NAMES as PROFILE_NAMES  # diff, lint and report read it here
from pcache.errors import UsageError


@cache
def profile_data() -> dict[str, Any]:
    return orjson.loads((resources.files("pcache") / "data" / "providers.json").read_bytes())


@dataclass(frozen=True, slots=True)
class Profile:
    """One cache's reuse rules (values from the data file)."""

    name: str
    granularity: str
    min_tokens: int
    keep_last_token: bool
    step_tokens: int = 0
    max_breakpoints: int = 0
    ttl_seconds: float | None = None
    price_family: str | None = None
    """The model family whose prices (`pcache.cache.prices`) a replay bills the log at."""
    cached_read_multiplier: float = 1.0
    cache_write_multiplier: float = 1.0
    input_price_per_mtok: float = 0.0
    """The three figures of `price_family`'s entry in the price table (none for engines)."""


def load_profile(name: str) -> Profile:
    profiles = profile_data()["profiles"]
    if name not in profiles:
        raise UsageError(f"unknown profile {name!r} (choose from {', '.join(profiles)})")
    entry = profiles[name]

    def value(key: str, default: Any) -> Any:
        return entry[key]["value"] if key in entry else default

    family = value("price_family", None)
    price = family_price(family) if family is not None else None
    return Profile(
        name=name,
        granularity=entry["granularity"],
        min_tokens=value("min_tokens", 0),
        keep_last_token=value("keep_last_token", True),
        step_tokens=value("step_tokens", 0),
        max_breakpoints=value("max_breakpoints", 0),
        ttl_seconds=value("ttl_seconds", None),
        price_family=family,
        cached_read_multiplier=round(price.cached_input / price.input, 6) if price else 1.0,
        cache_write_multiplier=round(price.miss / price.input, 6) if price else 1.0,
        input_price_per_mtok=price.input if price else 0.0,
    )


def model_entry(name: str, key: str, model: str | None) -> tuple[str, Any] | None:
    """(prefix, value) of a per-model value of profile `name` (`models.<key>`, the longest
    model-name prefix that `model` starts with, after any `provider/` or region prefix), or
    None when the data file lists none for the model."""
    table = profile_data()["profiles"].get(name, {}).get("models", {}).get(key)
    if not model or not isinstance(table, dict):
        return None
    tail = model.rsplit("/", 1)[-1].lower()
    for candidate in (tail, tail.split(".", 1)[-1] if tail.count(".") > 1 else tail):
        found = [prefix for prefix in table if candidate.startswith(prefix)]
        if found:
            prefix = max(found, key=len)
            return prefix, table[prefix]["value"]
    return None


def model_value(name: str, key: str, model: str | None) -> Any:
    """A per-model value of profile `name` (`model_entry`), or None."""
    entry = model_entry(name, key, model)
    return None if entry is None else entry[1]


def has_model_minimums(name: str) -> bool:
    """Whether the data file lists minimum prefixes by model for profile `name`."""
    table = profile_data()["profiles"].get(name, {}).get("models", {}).get("min_tokens")
    return isinstance(table, dict) and bool(table)


def profile_for_model(name: str, model: str | None) -> Profile:
    """Profile `name` with the minimum prefix of `model` where the data file lists one."""
    profile = load_profile(name)
    minimum = model_value(name, "min_tokens", model)
    return profile if minimum is None else replace(profile, min_tokens=minimum)


@dataclass(slots=True)
class ModelMinimums:
    """The profile each request's model gets: the minimum prefix of the data file's per-model
    table (longest matching prefix of the model name) when it lists the model, else the
    profile's default; remembers which was assumed for each model seen."""

    profile: Profile
    chosen: dict[str, tuple[int, str]] = field(default_factory=dict)
    """Model (or "" for none) -> (minimum tokens, `models.min_tokens[PREFIX]` or "default")."""
    _profiles: dict[str | None, Profile] = field(default_factory=dict, repr=False)
    _listed: bool | None = field(default=None, repr=False)

    def of(self, model: str | None) -> Profile:
        """The profile of a request for `model`."""
        found = self._profiles.get(model)
        if found is not None:
            return found
        if self._listed is None:
            self._listed = has_model_minimums(self.profile.name)
        found = self.profile
        if self._listed:
            entry = model_entry(self.profile.name, "min_tokens", model)
            if entry is None:
                self.chosen[model or ""] = (found.min_tokens, "default")
            else:
                found = replace(found, min_tokens=entry[1])
                self.chosen[model or ""] = (entry[1], f"models.min_tokens[{entry[0]}]")
        self._profiles[model] = found
        return found

    def as_dict(self) -> dict[str, dict[str, Any]]:
        return {
            model: {"min_tokens": tokens, "from": source}
            for model, (tokens, source) in sorted(self.chosen.items())
        }


TTL_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def longest_ttl_seconds(name: str) -> float | None:
    """The longest time profile `name`'s cache keeps an unused prefix under any option the data
    file lists (`ttl_seconds`, `ttl_values` such as "1h", retention and explicit-cache
    lifetimes); None: no lifetime (engines evict by memory pressure)."""
    entry = profile_data()["profiles"].get(name, {})
    found: list[float] = []
    for key in ("ttl_seconds", "explicit_cache_ttl_seconds"):
        if key in entry:
            found.append(float(entry[key]["value"]))
    for text in entry.get("ttl_values", {}).get("value", []):
        found.append(float(text[:-1]) * TTL_UNITS[text[-1]])
    for key, value in entry.get("retention", {}).items():
        if key != "note":
            found.append(float(value["value"]))
    return max(found, default=None)


def assumption(profile: Profile, block_size: int) -> str:
    """What a profile's reuse figure assumes, in a few words (diff prints it beside it)."""
    floor = f", min {profile.min_tokens:,}" if profile.min_tokens else ""
    if profile.granularity == "block":
        return f"full {block_size}-token blocks"
    if profile.granularity == "token":
        return f"to the token{floor}"
    if profile.granularity == "steps":
        return f"{profile.step_tokens or 1}-token steps{floor}"
    assert profile.granularity == "breakpoint", profile.granularity
    return f"at cache markers{floor}"


def reusable_tokens(
    profile: Profile,
    common_prefix: int,
    num_tokens_b: int,
    block_size: int,
    written_breakpoints: tuple[int, ...] = (),
) -> int:
    """Prompt tokens of B this cache reuses after A was cached, A and B sharing `common_prefix`.

    `written_breakpoints` (breakpoint granularity only) are the token positions where A's
    cache_control markers wrote an entry that B also marks or reads within the lookback.
    """
    limit = min(common_prefix, num_tokens_b - 1 if profile.keep_last_token else num_tokens_b)
    limit = max(limit, 0)
    if profile.granularity == "block":
        return (limit // block_size) * block_size
    if profile.granularity == "token":
        return limit if limit >= profile.min_tokens else 0
    if profile.granularity == "steps":
        if limit < profile.min_tokens:
            return 0
        step = profile.step_tokens or 1
        return profile.min_tokens + ((limit - profile.min_tokens) // step) * step
    if profile.granularity == "breakpoint":
        usable = [p for p in written_breakpoints if profile.min_tokens <= p <= limit]
        return max(usable, default=0)
    raise AssertionError(f"unknown granularity {profile.granularity}")
