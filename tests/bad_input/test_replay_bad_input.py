"""`pcache replay`: bad lines are skipped and counted (or fail with --strict), bad numbers are
one line; a hash-id trace under hypothesis never crashes."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from tests.bad_input.checks import assert_no_crash, assert_one_line_error, unchanged
from tests.bad_input.strategies import GOOD_HASH_LINE, mutated_hash_lines
from tests.conftest import SAMPLES

TRACE = SAMPLES / "traces" / "mooncake_tiny.jsonl"
BAD_LINES = [
    {"messages": [{"role": "assistant", "tool_calls": [{"function": "f"}]}]},
    {"messages": [{"role": "assistant", "tool_calls": [{"function": [1]}]}]},
    {"token_ids": [2**40]},
    {"messages": "hi"},
    "not an object",
]


def test_every_kind_of_bad_request_line_is_skipped_and_counted(cli, tmp_path):
    trace = tmp_path / "trace.jsonl"
    good = {"prompt": "hello there", "timestamp": 0}
    trace.write_text("\n".join(json.dumps(v) for v in [good, *BAD_LINES, good]) + "\n")
    with unchanged(tmp_path):
        result = cli("replay", trace, "--simulate", "-f", "json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["requests"] == 2
    assert result.stderr.count("skipped") == len(BAD_LINES), result.stderr
    with unchanged(tmp_path):
        assert_one_line_error(cli("replay", trace, "--simulate", "--strict"), f"{trace}:2:")


def test_hash_ids_beyond_64_bits_are_named_as_such(cli, tmp_path):
    trace = tmp_path / "trace.jsonl"
    trace.write_text(json.dumps({**GOOD_HASH_LINE, "hash_ids": [1, 2**70]}) + "\n")
    result = cli("replay", trace, "--simulate", "--strict")
    assert_one_line_error(result, f"{trace}:1:", "`hash_ids[1]` is beyond 64 bits")


def test_a_trace_of_nothing_valid_says_why(cli):
    result = cli("replay", TRACE, "--simulate", "--trace-format", "requests")
    assert_one_line_error(result, str(TRACE), "read as requests records", "unknown request shape")


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--ttft-ms-per-token", "nan"], "--ttft-ms-per-token must be a finite number, got nan"),
        (["--ttft-overhead-ms", "-1"], "--ttft-overhead-ms must be at least 0"),
        (["--ttft-ms-per-pair", "inf"], "--ttft-ms-per-pair must be a finite number"),
        (["--decode-rate", "0"], "--decode-rate must be greater than 0"),
        (["--cache-gb", "-1"], "--cache-gb must be greater than 0"),
        (["--trace-block-size", "0"], "--trace-block-size must be between 1 and"),
    ],
)
def test_numbers_are_checked_the_same_way(cli, args, fragment):
    assert_one_line_error(cli("replay", TRACE, "--simulate", *args), fragment)


CALIBRATION = {
    "format": "pcache-ttft-calibration/1",
    "model": {"overhead_ms": 1.0, "ms_per_token": 0.1, "ms_per_pair": 0.0},
    "samples": 3,
    "rank": 2,
    "rms_error_ms": 0.1,
    "probes": 0,
}
MODEL = CALIBRATION["model"]


@pytest.mark.parametrize(
    ("document", "fragment"),
    [
        ([1], "not a TTFT calibration file"),
        ({**CALIBRATION, "format": "x"}, "not a TTFT calibration file"),
        ({**CALIBRATION, "model": [1, 2, 3]}, "model must be an object"),
        ({**CALIBRATION, "model": {**MODEL, "overhead_ms": None}}, "model.overhead_ms must be a"),
        ({**CALIBRATION, "model": {**MODEL, "ms_per_token": "x"}}, "model.ms_per_token must be a"),
        ({**CALIBRATION, "model": {**MODEL, "ms_per_pair": -1}}, "must be at least 0, got -1"),
        ({**CALIBRATION, "samples": "x"}, "samples must be an integer"),
        ({**CALIBRATION, "samples": 1e308}, "samples must be an integer"),
        ({**CALIBRATION, "rank": [1]}, "rank must be an integer"),
        ({**CALIBRATION, "rms_error_ms": "x"}, "rms_error_ms must be a number"),
        ({**CALIBRATION, "probes": {}}, "probes must be an integer"),
        ({k: v for k, v in CALIBRATION.items() if k != "rank"}, "rank must be an integer"),
    ],
)
def test_a_malformed_calibration_file_is_named(cli, tmp_path, document, fragment):
    path = tmp_path / "calibration.json"
    path.write_text(json.dumps(document))
    with unchanged(tmp_path):
        result = cli("replay", TRACE, "--simulate", "--calibration", path)
    assert_one_line_error(result, str(path), fragment)


def test_a_valid_calibration_file_is_used(cli, tmp_path):
    path = tmp_path / "calibration.json"
    path.write_text(json.dumps(CALIBRATION))
    result = cli("replay", TRACE, "--simulate", "--calibration", path, "-f", "json")
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("1e30", "--time-scale must be between 0 and 1000.0, got 1e+30"),
        ("nan", "--time-scale must be a finite number, got nan"),
        ("-1", "--time-scale must be between 0 and 1000.0, got -1.0"),
    ],
)
def test_engine_time_scale_is_bounded(cli, value, fragment):
    args = ["--engine", "cpu", "--model", "tiny", "--concurrency", "timed"]
    assert_one_line_error(cli("replay", TRACE, *args, "--time-scale", value), fragment)


def test_a_model_config_with_zero_heads_is_named(cli, tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"num_hidden_layers": 2, "num_attention_heads": 0}))
    result = cli("replay", TRACE, "--simulate", "--model", config, "--cache-gb", "1")
    assert_one_line_error(result, str(config), "num_attention_heads must be between 1 and")


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(line=mutated_hash_lines())
def test_any_hostile_hash_id_line_is_skipped_or_refused_cleanly(cli, line):
    with tempfile.TemporaryDirectory() as folder:
        trace = Path(folder) / "trace.jsonl"
        trace.write_text(json.dumps(GOOD_HASH_LINE) + "\n" + json.dumps(line) + "\n")
        with unchanged(Path(folder)):
            lenient = cli("replay", trace, "--simulate", "-f", "json")
            strict = cli("replay", trace, "--simulate", "--strict", "-f", "json")
        assert_no_crash(lenient)
        assert_no_crash(strict)
        assert lenient.exit_code == 0, lenient.output
        if strict.exit_code == 2:
            assert_one_line_error(strict, f"{trace}:2")
