"""Bad input: one line on stderr naming the file, exit code 2, no traceback, no hang."""

from __future__ import annotations

import json

import pytest

from tests.conftest import SAMPLES, run_pcache


def one_line_error(result, *fragments):
    assert result.exit_code == 2, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("pcache: error: ")
    assert "Traceback" not in result.output
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def test_malformed_json_names_line_and_column(cli, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{\n  "messages": [\n    {"role": "user", "content": "hi"},\n  ]\n}\n')
    one_line_error(
        cli("diff", bad, SAMPLES / "a.json", "-t", "o200k_base"), f"{bad}:3:38", "trailing comma"
    )


def test_missing_file(cli, tmp_path):
    one_line_error(cli("hash", tmp_path / "nope.json", "-t", "o200k_base"), "no such file")


def test_directory(cli, tmp_path):
    one_line_error(cli("hash", tmp_path, "-t", "o200k_base"), "is a directory")


def test_empty_file(cli, tmp_path):
    empty = tmp_path / "empty.json"
    empty.write_text("  \n")
    one_line_error(cli("hash", empty, "-t", "o200k_base"), "empty")


def test_binary_file(cli, tmp_path):
    binary = tmp_path / "blob.json"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    one_line_error(cli("hash", binary, "-t", "o200k_base"), "binary")


def test_huge_file_is_refused_without_reading_it(cli, tmp_path):
    huge = tmp_path / "huge.json"
    with huge.open("wb") as handle:
        handle.truncate(1 << 30)  # sparse: 1 GiB without writing it
    one_line_error(cli("hash", huge, "-t", "o200k_base"), "too large")


@pytest.mark.parametrize(
    ("document", "fragment"),
    [
        ([1, 2], "expected a JSON object"),
        ({"foo": 1}, "unknown request shape"),
        ({"messages": [{"content": "no role"}]}, "messages[0]"),
        ({"token_ids": [1, -2]}, "token_ids"),
        ({"prompt": 3}, "prompt"),
        ({"messages": [], "tools": {"a": 1}}, "tools"),
    ],
)
def test_unknown_or_invalid_shapes(cli, tmp_path, document, fragment):
    path = tmp_path / "req.json"
    path.write_text(json.dumps(document))
    one_line_error(cli("hash", path, "-t", "o200k_base"), str(path), fragment)


def test_jsonl_error_names_the_line(cli, tmp_path):
    log = tmp_path / "log.jsonl"
    log.write_text('{"prompt": "a"}\n{"prompt": "b"\n')
    one_line_error(cli("hash", log, "-t", "o200k_base"), f"{log}:2:")


def test_unknown_tokenizer_fails_fast(cli):
    one_line_error(cli("hash", SAMPLES / "a.json", "-t", "./no/such/model/dir"), "no/such/model")


def test_bad_options(cli):
    one_line_error(cli("hash", SAMPLES / "a.json", "--hash-algo", "md5"), "hash-algo")
    one_line_error(cli("hash", SAMPLES / "a.json", "--date", "yesterday"), "--date")
    one_line_error(
        cli("diff", SAMPLES / "a.json", SAMPLES / "b.json", "--format", "xml"), "--format"
    )
    one_line_error(cli("diff", SAMPLES / "a.json"), "Missing argument 'b'")


def test_subprocess_exit_codes_and_stdin():
    bad = run_pcache("hash", "-", "-t", "o200k_base", input=b"{oops")
    assert bad.returncode == 2
    assert bad.stderr.decode().strip() == (
        "pcache: error: <stdin>:1:2: invalid JSON: unexpected character, expected a string key"
    )
    same = run_pcache("diff", SAMPLES / "a.json", SAMPLES / "a.json", "-t", "o200k_base")
    assert same.returncode == 0, same.stderr
    different = run_pcache("diff", SAMPLES / "a.json", SAMPLES / "b.json", "-t", "o200k_base")
    assert different.returncode == 1, different.stderr
    assert b"Traceback" not in different.stderr


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["hash", SAMPLES / "a.json", "--no-such-option"], "No such option: --no-such-option"),
        (["hash", SAMPLES / "a.json", "-b", "0"], "--block-size must be between 1 and"),
        (["hash", SAMPLES / "a.json", "-b", "many"], "valid integer"),
        (["diff", SAMPLES / "a.json"], "Missing argument 'b'"),
        (["no-such-command"], "No such command"),
    ],
)
def test_usage_errors_are_one_line_not_internal_errors(cli, args, fragment):
    result = cli(*args)
    one_line_error(result, fragment)
    assert "internal error" not in result.stderr


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--cache-blocks", str(10**23)], "--cache-blocks must be between 1 and"),
        (["--cache-gb", "nan"], "--cache-gb must be a finite number, got nan"),
        (["--cache-gb", "inf"], "--cache-gb must be a finite number, got inf"),
        (["--concurrency", "timed", "--decode-rate", "nan"], "--decode-rate"),
        (["-b", str(10**20)], "--block-size must be between 1 and"),
        (["--capacity-sweep", "--sweep-points", str(10**20)], "--sweep-points must be between 2"),
    ],
)
def test_replay_refuses_huge_or_non_finite_numbers(cli, args, fragment):
    trace = SAMPLES / "traces" / "mooncake_tiny.jsonl"
    one_line_error(cli("replay", trace, "--simulate", *args), fragment)


def test_replay_cache_larger_than_the_trace_behaves_as_unlimited(cli):
    trace = SAMPLES / "traces" / "mooncake_tiny.jsonl"
    unlimited = json.loads(cli("replay", trace, "--simulate", "-f", "json").stdout)
    vast = cli("replay", trace, "--simulate", "--cache-blocks", str(10**12), "-f", "json")
    assert vast.exit_code == 0, vast.output
    vast = json.loads(vast.stdout)
    assert vast["capacity_blocks"] == 10**12
    assert vast["hit_tokens"] == unlimited["hit_tokens"]
    assert vast["evicted_blocks"] == 0


def test_lint_refuses_a_huge_block_size(cli):
    one_line_error(cli("lint", SAMPLES / "prompts", "-b", str(10**11)), "--block-size must be")


@pytest.mark.parametrize("command", ["replay", "synth"])
def test_unwritable_output_is_refused_before_any_work(cli, tmp_path, command):
    trace = SAMPLES / "traces" / "mooncake_tiny.jsonl"
    folder = tmp_path / "out"
    folder.mkdir()
    for target, fragment in (
        (folder, "is a directory"),
        (tmp_path / "missing" / "x.jsonl", "no such directory"),
    ):
        if command == "replay":
            result = cli("replay", trace, "--simulate", "-o", target)
        else:
            result = cli("trace", "synth", "-n", "3", "-o", target)
        one_line_error(result, str(target), fragment)
    assert list(folder.iterdir()) == []


def test_output_files_are_written_whole(cli, tmp_path):
    trace = SAMPLES / "traces" / "mooncake_tiny.jsonl"
    per_request = tmp_path / "per_request.jsonl"
    assert cli("replay", trace, "--simulate", "-o", per_request).exit_code == 0
    lines = per_request.read_text().splitlines()
    assert len(lines) == sum(1 for line in trace.read_text().splitlines() if line.strip())
    assert all("cached_tokens" in json.loads(line) for line in lines)
    assert [path.name for path in tmp_path.iterdir()] == ["per_request.jsonl"]


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["-n", str(10**23)], "--num-requests must be between 1 and"),
        (["--rate", "nan"], "--rate must be a finite number, got nan"),
        (["--system-len", "-1"], "--system-len must be between 0 and"),
        (["--system-len", str(10**11)], "--system-len must be between 0 and"),
        (["--zipf-alpha", "nan"], "--zipf-alpha must be a finite number, got nan"),
        (["--seed", "-1"], "--seed must be between 0 and"),
        (["--output-len", "-1"], "--output-len"),
        (["--workload", "agent", "--tools-len", "-1"], "--tools-len"),
        (["--workload", "chat", "--window", "-1"], "--window"),
    ],
)
def test_trace_synth_refuses_out_of_range_numbers(cli, args, fragment):
    one_line_error(cli("trace", "synth", *args), fragment)
