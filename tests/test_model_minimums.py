"""Per-model minimum prefixes: lint's costs, PC501 and `replay --simulate --profile` take the
minimum of the request's model (the body's `model`, Bedrock's `modelId`, Gemini's URL) from
the profile's model table, longest matching prefix first, and fall back to the default."""

from __future__ import annotations

import json

import pytest

from pcache.cache.profiles import ModelMinimums, load_profile, model_value

WORDS = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot")
WORDS += ("golf", "hotel", "india", "juliet", "kilo", "lima")


def _system(words: int) -> str:
    return " ".join(WORDS[index % len(WORDS)] for index in range(words))


def _chat(model: str, system: str, question: str) -> dict:
    return {
        "model": model,
        "messages": [
            {"role": "system", "content": system},
            {"role": "user", "content": question},
        ],
    }


def _gemini(model: str, system: str, question: str) -> dict:
    url = f"https://generativelanguage.googleapis.com/v1beta/models/{model}:generateContent"
    body = {
        "systemInstruction": {"parts": [{"text": system}]},
        "contents": [{"role": "user", "parts": [{"text": question}]}],
    }
    return {"url": url, "body": body}


def _bedrock(model: str, system: str, question: str) -> dict:
    return {
        "modelId": model,
        "system": [{"text": system}, {"cachePoint": {"type": "default"}}],
        "messages": [{"role": "user", "content": [{"text": question}]}],
    }


SHAPES = {"chat": _chat, "gemini": _gemini, "bedrock": _bedrock}


def _log(tmp_path, shape: str, model: str, words: int):
    make = SHAPES[shape]
    lines = [make(model, _system(words), q) for q in ("Where is my order?", "Cancel it.")]
    path = tmp_path / f"{shape}-{words}.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def _lint(cli, path, profile: str) -> dict:
    result = cli("lint", str(path), "-t", "o200k_base", "--profile", profile, "--format", "json")
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)


def _shared(cli, path) -> int:
    """Tokens the second request shares with the first (sglang reuses them to the token)."""
    return _lint(cli, path, "sglang")["summary"]["reusable_tokens"]


def _log_sharing(cli, tmp_path, shape: str, model: str, low: int, high: int):
    """A log whose two requests share between `low` and `high` tokens (inclusive)."""
    words = low
    for _ in range(40):
        path = _log(tmp_path, shape, model, words)
        shared = _shared(cli, path)
        if low <= shared <= high:
            return path, shared
        words = max(1, words + ((low + high) // 2 - shared or 1))
    raise AssertionError(f"no system prompt shares {low}..{high} tokens (last: {shared})")


CASES = [
    ("gemini", "chat", "gemini-2.5-flash", 2048),
    ("gemini", "gemini", "gemini-3-pro-preview", 4096),
    ("bedrock", "bedrock", "us.anthropic.claude-3-5-haiku-20241022-v1:0", 2048),
    ("bedrock", "bedrock", "amazon.nova-pro-v1:0", 1000),
]


@pytest.mark.parametrize(("profile", "shape", "model", "minimum"), CASES)
def test_lint_charges_below_and_reuses_above_the_models_minimum(
    cli, tmp_path, profile, shape, model, minimum
):
    assert model_value(profile, "min_tokens", model) == minimum
    below, shared_below = _log_sharing(cli, tmp_path, shape, model, minimum - 24, minimum - 1)
    above, shared_above = _log_sharing(cli, tmp_path, shape, model, minimum, minimum + 24)
    assert _lint(cli, below, profile)["summary"]["reusable_tokens"] == 0
    assert _lint(cli, above, profile)["summary"]["reusable_tokens"] == shared_above
    assert shared_below < minimum <= shared_above


def test_an_unlisted_model_gets_the_profile_default_and_says_so(cli, tmp_path):
    default = load_profile("gemini").min_tokens
    path, shared = _log_sharing(cli, tmp_path, "chat", "gemma-local", default, default + 24)
    assert _lint(cli, path, "gemini")["summary"]["reusable_tokens"] == shared
    minimums = ModelMinimums(load_profile("gemini"))
    assert minimums.of("gemma-local").min_tokens == default
    assert minimums.of("gemini-3-flash").min_tokens == 4096
    assert minimums.as_dict() == {
        "gemini-3-flash": {"min_tokens": 4096, "from": "models.min_tokens[gemini-3]"},
        "gemma-local": {"min_tokens": default, "from": "default"},
    }


def test_pc501_names_the_minimum_it_assumed(cli, tmp_path):
    def pc501(path) -> str:
        return cli(
            "lint", str(path), "-t", "o200k_base", "--profile", "gemini",
            "--extend-select", "PC501", "--format", "concise",
        ).stdout  # fmt: skip

    listed = pc501(_log(tmp_path, "chat", "gemini-3-pro-preview", 2500))
    assert "below the 4096-token minimum of gemini-3 on the gemini profile" in listed
    unlisted = pc501(_log(tmp_path, "chat", "gemma-local", 100))
    assert "(its default: gemma-local is not in its model table)" in unlisted


@pytest.mark.parametrize(("profile", "shape", "model", "minimum"), CASES[1:3])
def test_replay_simulate_takes_the_models_minimum(cli, tmp_path, profile, shape, model, minimum):
    below, _ = _log_sharing(cli, tmp_path, shape, model, minimum - 24, minimum - 1)
    above, shared = _log_sharing(cli, tmp_path, shape, model, minimum, minimum + 24)
    reports = []
    for path in (below, above):
        result = cli(
            "replay", str(path), "--simulate", "--policy", profile, "-t", "o200k_base",
            "--format", "json",
        )  # fmt: skip
        assert result.exit_code == 0, result.output
        reports.append(json.loads(result.stdout))
    assert reports[0]["hit_tokens"] == 0
    assert (
        reports[1]["hit_tokens"]
        == shared
        == _lint(cli, above, profile)["summary"]["reusable_tokens"]
    )
    chosen = reports[1]["bill"]["min_tokens_by_model"][model]
    assert chosen["min_tokens"] == minimum and chosen["from"].startswith("models.min_tokens[")
