"""lint beside the log's own cached-token counts: observed totals, disagreements, reasons."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pcache.cache.profiles import load_profile
from pcache.pipeline import Settings
from pcache.prompt.shapes.request import request_from_document
from pcache.prompt.shapes.request_record import cached_tokens_of
from pcache.rules import observed as observed_module
from pcache.rules.observed import KEEP_WORST, ObservedUsage
from pcache.rules.runner import LintOptions, lint_values

SHAPES = Path(__file__).parent / "data" / "shapes"
LONG = "You answer questions about parcels, shipping zones and customs forms. " * 160


def _usage_total(path: Path) -> tuple[int, int]:
    """(requests reporting cached tokens, their sum), read from the file itself."""
    values = [cached_tokens_of(json.loads(line).get("usage")) for line in path.open()]
    known = [value for value in values if value is not None]
    return len(known), sum(known)


@pytest.mark.parametrize("name", ["chat.jsonl", "responses.jsonl", "bedrock.jsonl"])
def test_json_summary_holds_observed_beside_predicted(cli, name):
    result = cli("lint", SHAPES / name, "-f", "json", "--exit-zero")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)["summary"]
    observed = summary["observed"]
    assert (observed["requests"], observed["observed_cached_tokens"]) == _usage_total(SHAPES / name)
    assert observed["requests"] == summary["requests"]  # every line reports usage
    assert observed["predicted_reusable_tokens"] == summary["reusable_tokens"]
    worst = observed["largest_differences"]
    assert 0 < len(worst) <= min(KEEP_WORST, observed["disagreeing_requests"])
    gaps = [abs(e["observed_cached_tokens"] - e["predicted_reusable_tokens"]) for e in worst]
    assert gaps == sorted(gaps, reverse=True)
    assert all(e["reason"] for e in worst)


def test_text_and_concise_output_show_the_comparison(cli):
    full = cli("lint", SHAPES / "bedrock.jsonl", "--exit-zero").stdout
    assert "Observed cached tokens (the log's usage, in 5 requests): 288;" in full
    assert "predicted reusable (vllm profile): 784" in full
    assert "lint it with --profile bedrock" in full
    concise = cli("lint", SHAPES / "bedrock.jsonl", "-f", "concise", "--exit-zero").stdout
    assert "Observed cached tokens" in concise and "lint it with" not in concise


def test_a_log_without_usage_has_no_comparison(cli):
    result = cli("lint", "samples/prompts", "-f", "json", "--exit-zero")
    assert "observed" not in json.loads(result.stdout)["summary"]
    assert "Observed cached tokens" not in cli("lint", "samples/prompts", "--exit-zero").stdout


def _turn(question: str, cached: int, timestamp: int, model: str = "gpt-5") -> dict:
    return {
        "session_id": "s1",
        "timestamp": timestamp,
        "usage": {"prompt_tokens_details": {"cached_tokens": cached}},
        "body": {
            "model": model,
            "messages": [
                {"role": "system", "content": LONG},
                {"role": "user", "content": question},
            ],
        },
    }


def _reasons(lines: list[dict], profile: str = "vllm") -> list[str]:
    options = LintOptions(settings=Settings(tokenizer="o200k_base", profile=profile))
    observed = lint_values(lines, options).summary.observed
    return [entry.reason for entry in observed.worst]


def test_the_reasons_name_ttl_provider_minimum_and_unshared_caches():
    late = _reasons([_turn("Where is A1?", 0, 0), _turn("And B2?", 0, 15 * 60 * 1000)])
    assert late == [late[0]] and late[0].startswith("TTL: 900 s after")
    unshared = _reasons([_turn("Where is A1?", 0, 0), _turn("And B2?", 0, 1000)])
    assert unshared[0].startswith("a cache not shared")
    short = [
        {**_turn(q, 0, t), "body": {"model": "gpt-5", "messages": [{"role": "user", "content": q}]}}
        for q, t in (("Where is parcel A1 now, and when does it arrive? " * 20, 0),) * 2
    ]
    assert _reasons(short)[0].startswith("provider minimum: openai caches nothing shorter than")
    first = _reasons([_turn("Where is A1?", 4000, 0)])
    assert first == ["cached by requests before this log (the first of its session)"]


def test_agreement_within_tolerance_is_not_listed():
    options = LintOptions(settings=Settings(tokenizer="o200k_base"))
    lines = [_turn("Where is A1?", 0, 0), _turn("And B2?", 0, 1000)]
    predicted = lint_values(lines, options).summary.reusable_tokens
    lines[1]["usage"]["prompt_tokens_details"]["cached_tokens"] = predicted + 3
    observed = lint_values(lines, options).summary.observed
    assert (observed.requests, observed.disagreeing, observed.worst) == (2, 0, [])


@given(st.lists(st.tuples(st.integers(0, 5000), st.integers(0, 5000)), max_size=40))
def test_the_largest_differences_are_kept_whatever_the_length(pairs):
    usage = ObservedUsage()
    profile = load_profile("vllm")
    for number, (observed, predicted) in enumerate(pairs):
        request = request_from_document({"prompt": "x", "usage": {}}, "log.jsonl", number + 1)
        request.cached_tokens = observed
        usage.add(request, 10_000, predicted, profile, 16, None)
    assert usage.observed_tokens == sum(o for o, _ in pairs)
    assert usage.predicted_tokens == sum(p for _, p in pairs)
    far = sorted((abs(o - p) for o, p in pairs if abs(o - p) > 1000), reverse=True)
    assert usage.disagreeing == len(far)
    assert [abs(e.gap) for e in usage.worst] == far[:KEEP_WORST]
    assert [(e.observed, e.predicted) for e in usage.per_request] == pairs


def _usage_per_line(path: Path) -> list[tuple[int, int]]:
    """(line, cached tokens) of each line reporting them, read from the file itself."""
    pairs = [
        (n, cached_tokens_of(json.loads(text).get("usage")))
        for n, text in enumerate(path.open(), start=1)
    ]
    return [(line, cached) for line, cached in pairs if cached is not None]


@pytest.mark.parametrize("name", ["chat.jsonl", "bedrock.jsonl"])
def test_json_lists_each_request_observed_beside_predicted(cli, name):
    observed = json.loads(cli("lint", SHAPES / name, "-f", "json", "--exit-zero").stdout)[
        "summary"
    ]["observed"]
    listed = observed["per_request"]
    assert [(e["line"], e["observed"]) for e in listed] == _usage_per_line(SHAPES / name)
    assert {e["source"] for e in listed} == {str(SHAPES / name)}
    assert sum(e["predicted"] for e in listed) == observed["predicted_reusable_tokens"]
    assert observed["per_request_truncated"] is False
    for worst in observed["largest_differences"]:
        line = int(worst["request"].rsplit(":", 1)[1])
        entry = next(e for e in listed if e["line"] == line)
        assert (entry["observed"], entry["predicted"]) == (
            worst["observed_cached_tokens"],
            worst["predicted_reusable_tokens"],
        )


def test_the_per_request_list_is_bounded_and_says_so(monkeypatch):
    monkeypatch.setattr(observed_module, "KEEP_REQUESTS", 2)
    options = LintOptions(settings=Settings(tokenizer="o200k_base"))
    lines = [_turn(f"Where is parcel {n}?", 0, n * 1000) for n in range(4)]
    summary = lint_values(lines, options).summary.observed.as_dict()
    assert summary["requests"] == 4
    assert [e["line"] for e in summary["per_request"]] == [1, 2]
    assert summary["per_request_truncated"] is True


def test_report_shows_the_same_comparison_as_lint(cli, tmp_path):
    log = SHAPES / "bedrock.jsonl"
    lint = json.loads(cli("lint", log, "-f", "json", "--exit-zero").stdout)["summary"]["observed"]
    result = cli("report", log, "--format", "json", "-o", "-")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["lint"]["summary"]["observed"] == lint
    page = tmp_path / "report.html"
    assert cli("report", log, "-o", page).exit_code == 0
    html = page.read_text()
    assert '<h2 id="observed-title">Observed vs predicted</h2>' in html
    for key in ("observed_cached_tokens", "predicted_reusable_tokens", "disagreeing_requests"):
        assert f'data-figure="{key}" data-value="{lint[key]}"' in html
    assert f'data-figure="observed_requests" data-value="{lint["requests"]}"' in html
    for worst in lint["largest_differences"]:
        assert f"<code>{worst['request']}</code>" in html
        assert worst["reason"].replace("'", "&#39;") in html


def test_a_report_without_usage_has_no_comparison(cli, tmp_path):
    page = tmp_path / "report.html"
    assert cli("report", "samples/prompts", "-o", page).exit_code == 0
    assert "Observed vs predicted" not in page.read_text()


def test_the_docs_name_the_per_request_bound():
    docs = (Path(__file__).parent.parent / "docs" / "lint.md").read_text()
    assert f"the first {observed_module.KEEP_REQUESTS:,}" in docs
