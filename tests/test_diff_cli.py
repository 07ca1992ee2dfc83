"""`pcache diff` through the CLI: the seeds' block arithmetic, exit codes, JSON shape."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pcache.defaults import PROFILE_NAMES
from tests.conftest import SAMPLES


def write_ids(tmp_path, name, ids):
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps({"token_ids": ids}))
    return path


def diff_json(cli, a, b, *options):
    result = cli("diff", a, b, "--format", "json", *options)
    assert result.exit_code in (0, 1), result.output
    return result, json.loads(result.stdout)


def divergent(length, position, offset=1000):
    base = list(range(length))
    other = list(base)
    for index in range(position, length):
        other[index] = base[index] + offset
    return base, other


@pytest.mark.parametrize(
    ("length", "position", "block_size", "expected"),
    [
        (13, 5, 4, 4),
        (13, 9, 4, 8),
        (13, 5, 8, 0),
        (40, 35, 16, 32),
    ],
)
def test_seed_arithmetic(cli, tmp_path, length, position, block_size, expected):
    left, right = divergent(length, position)
    a, b = write_ids(tmp_path, "a", left), write_ids(tmp_path, "b", right)
    result, data = diff_json(cli, a, b, "--block-size", block_size)
    assert result.exit_code == 1
    assert data["first_divergence_token"] == position
    assert data["first_divergent_block"] == position // block_size
    assert data["reusable_tokens"]["vllm"] == expected
    assert data["reusable_tokens"]["sglang"] == position
    assert data["num_tokens"] == [length, length]
    assert data["block_size"] == block_size


@pytest.mark.parametrize(("length", "expected"), [(12, 8), (13, 12), (48, 32), (49, 48)])
def test_identical_prompts_keep_the_last_token(cli, tmp_path, length, expected):
    size = 16 if length > 40 else 4
    a = write_ids(tmp_path, "a", list(range(length)))
    result, data = diff_json(cli, a, a, "--block-size", size)
    assert result.exit_code == 0
    assert data["identical"] is True
    assert data["first_divergence_token"] is None
    assert data["first_divergent_block"] is None
    assert data["reusable_tokens"]["vllm"] == expected
    assert data["reusable_tokens"]["sglang"] == length - 1


def test_prefix_reports_the_shorter_length(cli, tmp_path):
    a = write_ids(tmp_path, "a", list(range(20)))
    b = write_ids(tmp_path, "b", list(range(30)))
    result, data = diff_json(cli, a, b, "--block-size", 4)
    assert result.exit_code == 1
    assert data["first_divergence_token"] == 20
    assert data["reusable_tokens"]["vllm"] == 20
    assert data["cause"]["kind"] == "append"


def test_openai_steps_and_minimum(cli, tmp_path):
    left, right = divergent(3000, 1500)
    a, b = write_ids(tmp_path, "a", left), write_ids(tmp_path, "b", right)
    _, data = diff_json(cli, a, b)
    assert data["reusable_tokens"]["openai"] == 1408  # 1024 + 3 * 128
    left, right = divergent(3000, 1000)
    a, b = write_ids(tmp_path, "a", left), write_ids(tmp_path, "b", right)
    _, data = diff_json(cli, a, b)
    assert data["reusable_tokens"]["openai"] == 0


def test_cache_salt_isolates(cli, tmp_path):
    a = tmp_path / "a.json"
    b = tmp_path / "b.json"
    a.write_text(json.dumps({"token_ids": list(range(64)), "cache_salt": "tenant-1"}))
    b.write_text(json.dumps({"token_ids": list(range(64)), "cache_salt": "tenant-2"}))
    result, data = diff_json(cli, a, b, "--hash-algo", "sha256_cbor")
    assert result.exit_code == 0  # identical rendered tokens
    assert data["cause"]["kind"] == "cache_salt"
    assert data["common_blocks"] == 0
    assert data["reusable_tokens"]["vllm"] == 0
    assert data["reusable_tokens"]["sglang"] == 0


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(0, 100_000), min_size=1, max_size=60), st.sampled_from([1, 4, 16]))
def test_diff_of_a_request_with_itself_is_identical(tmp_path_factory, ids, size):
    from typer.testing import CliRunner

    from pcache.cli.app import app

    path = tmp_path_factory.mktemp("same") / "x.json"
    path.write_text(json.dumps({"token_ids": ids}))
    result = CliRunner().invoke(
        app, ["diff", str(path), str(path), "-b", str(size), "--format", "json"]
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["identical"] and data["first_divergence_token"] is None
    assert data["reusable_tokens"]["vllm"] == ((len(ids) - 1) // size) * size


def test_samples_show_a_clock_in_the_system_prompt(cli):
    result = cli("diff", SAMPLES / "a.json", SAMPLES / "b.json", "--format", "json")
    assert result.exit_code == 1, result.output
    data = json.loads(result.stdout)
    cause = data["cause"]
    assert cause["kind"] == "clock"
    assert cause["a_path"] == cause["b_path"] == "messages[0].content"
    assert "09:21:07" in cause["a_excerpt"] and "09:24:51" in cause["b_excerpt"]
    assert set(data["reusable_tokens"]) == set(PROFILE_NAMES)
    text = cli("diff", SAMPLES / "a.json", SAMPLES / "b.json")
    assert text.exit_code == 1
    assert "First divergence at token" in text.stdout
    assert "clock" in text.stdout and "messages[0].content" in text.stdout


def test_stdin_is_accepted_once(cli):
    data = (SAMPLES / "a.json").read_text()
    result = cli("diff", "-", SAMPLES / "a.json", "--format", "json", input=data)
    assert result.exit_code == 0, result.output
    both = cli("diff", "-", "-", input=data)
    assert both.exit_code == 2
    assert "stdin" in both.stderr
