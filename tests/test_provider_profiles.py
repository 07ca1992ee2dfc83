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


def test_every_profile_of_the_data_file_is_a_profile_name():
    from pcache.defaults import PROFILE_NAMES

    assert tuple(profile_data()["profiles"]) == PROFILE_NAMES


@pytest.mark.parametrize("name", ["gemini", "bedrock", "deepseek"])
def test_lint_and_diff_take_the_new_profiles(name):
    import orjson
    from typer.testing import CliRunner

    from pcache.cli.app import app

    shapes = "tests/data/shapes"
    lint = CliRunner().invoke(
        app, ["lint", f"{shapes}/chat.jsonl", "--profile", name, "-f", "json"]
    )
    assert lint.exit_code in (0, 1), lint.output
    assert orjson.loads(lint.stdout)["summary"]["profile"] == name
    diff = CliRunner().invoke(app, ["diff", "samples/a.json", "samples/b.json", "-f", "json"])
    result = orjson.loads(diff.stdout)
    assert (
        set(result["reusable_tokens"])
        == set(result["reuse_assumes"])
        == set(profile_data()["profiles"])
    )
    assert "min" in result["reuse_assumes"][name]


def test_bedrock_cache_points_end_where_the_content_before_them_ends():
    from pcache.divergence.compare import breakpoint_positions
    from pcache.prompt.reading.loading import iter_documents
    from pcache.prompt.renderers.render import render, resolve_renderer
    from pcache.prompt.shapes.request import request_of

    renderer = resolve_renderer("gpt-oss")
    for document in iter_documents("tests/data/shapes/bedrock.jsonl"):
        request = request_of(document)
        rendered = render(request, renderer)
        positions = breakpoint_positions(rendered)
        assert len(positions) == len(request.breakpoints) == 3
        assert all(0 < p < rendered.num_tokens for p in positions)
        request.breakpoints.clear()  # no cachePoint: Bedrock caches nothing
        assert breakpoint_positions(rendered) == ()
