"""Provider profiles in `pcache/data/providers.json`: every figure sourced and dated."""

from __future__ import annotations

import pytest

from pcache.cache.profiles import load_profile, model_value, profile_data, profile_for_model


def _values(node, path=""):
    """(path, entry) for every `{"value": ...}` entry of the data file."""
    if isinstance(node, dict):
        if "value" in node:
            yield path, node
            return
        for key, child in node.items():
            yield from _values(child, f"{path}.{key}" if path else key)


def test_every_figure_names_its_source_and_date():
    entries = list(_values(profile_data()["profiles"]))
    assert len(entries) > 50
    for path, entry in entries:
        assert isinstance(entry.get("source"), str) and entry["source"], path
        assert isinstance(entry.get("as_of"), str) and entry["as_of"][:4].isdigit(), path


def test_bedrock_caches_at_checkpoints_with_per_model_minimums():
    profile = load_profile("bedrock")
    assert (profile.granularity, profile.max_breakpoints, profile.ttl_seconds) == (
        "breakpoint",
        4,
        300,
    )
    haiku = "us.anthropic.claude-3-5-haiku-20241022-v1:0"  # a cross-region inference profile
    assert profile_for_model("bedrock", haiku).min_tokens == 2048
    assert profile_for_model("bedrock", "amazon.nova-lite-v1:0").min_tokens == 1000
    assert profile_for_model("bedrock", "some.unknown-model").min_tokens == profile.min_tokens


@pytest.mark.parametrize(
    ("model", "minimum"),
    [("gemini-2.5-flash", 2048), ("models/gemini-2.5-pro", 2048), ("gemini-3-pro-preview", 4096)],
)
def test_gemini_minimum_prefix_by_model(model, minimum):
    assert profile_for_model("gemini", model).min_tokens == minimum


def test_gemini_explicit_cache_and_openai_retention_are_data():
    gemini = profile_data()["profiles"]["gemini"]
    assert gemini["explicit_cache_ttl_seconds"]["value"] == 3600
    retention = profile_data()["profiles"]["openai"]["retention"]
    assert (retention["in_memory"]["value"], retention["24h"]["value"]) == (600, 86400)
    assert model_value("openai", "min_tokens", "gpt-5") is None
