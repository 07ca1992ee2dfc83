"""Hostile inputs on the newer surfaces (tables, wire shapes, fleet options, `-t`, Ray and
`serve` options) end in exit code 0, 1 or 2 with one line, never an internal error; inputs are
never changed and a refused run leaves no output. `bench/adversarial_inputs.py` runs the
whole sweep; these are its classes, one or a few cases each."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import adversarial_inputs as sweep  # noqa: E402


def outcome(cli, tmp_path: Path, files: dict[str, bytes], *arguments: str):
    """The result of one case, checked for the promise every case keeps."""
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    before = {name: hashlib.sha256(data).hexdigest() for name, data in files.items()}
    output = tmp_path / "out.json"
    names = [str(tmp_path / a) if a in files or a == "out.json" else a for a in arguments]
    result = cli(*names)
    text = result.output
    assert result.exit_code in (0, 1, 2), text
    assert "internal error" not in text and "Traceback" not in text, text
    for name, value in before.items():
        assert hashlib.sha256((tmp_path / name).read_bytes()).hexdigest() == value
    if result.exit_code == 2:
        assert not output.exists(), "a refused run left its output"
    return result


TABLES = {
    name: data
    for name, data in (
        ("random.parquet", bytes(range(256)) * 16),
        ("truncated.parquet", sweep.parquet({"body": [json.dumps(sweep.CHAT)]})[:200]),
        ("no-json.parquet", sweep.parquet({"a": [1], "b": ["x"]})),
        ("bom-utf16.csv", "body\n".encode("utf-16")),
        ("nul.csv", b'body\n"{}"\0\n'),
        ("bom.csv", b"\xef\xbb\xbfbody\n" + sweep.csv_cell(sweep.CHAT)),
        ("not-json.csv", b"body\n{not json\n"),
    )
}


@pytest.mark.parametrize("name", sorted(TABLES))
def test_hostile_tables_are_findings_or_one_line_errors(cli, tmp_path, name):
    pytest.importorskip("pyarrow")
    outcome(cli, tmp_path, {name: TABLES[name]}, "lint", name, "--format", "json")
    outcome(cli, tmp_path, {name: TABLES[name]}, "replay", name, "--simulate", "-o", "out.json")


def test_a_utf16_csv_is_named_as_such(cli, tmp_path):
    pytest.importorskip("pyarrow")
    result = outcome(cli, tmp_path, {"t.csv": TABLES["bom-utf16.csv"]}, "lint", "t.csv")
    assert "UTF-16" in result.output


def test_a_missing_or_non_json_column_is_named(cli, tmp_path):
    pytest.importorskip("pyarrow")
    table = sweep.parquet({"id": [1], "body": [json.dumps(sweep.CHAT)]})
    for column in ("nope", "id"):
        result = outcome(
            cli, tmp_path, {"t.parquet": table}, "lint", "t.parquet", "--column", column
        )
        assert result.exit_code == 1 and "unreadable-input" in result.output
        assert column == "id" or repr(column) in " ".join(result.output.split())


CHAINS = {
    "cycle": [sweep.responses("a", "b"), sweep.responses("b", "a")],
    "self": [sweep.responses("a", "a")],
    "missing": [sweep.responses("a", "zzz")],
}


@pytest.mark.parametrize("kind", sorted(CHAINS))
def test_cyclic_and_missing_previous_response_chains_name_the_response(cli, tmp_path, kind):
    files = {"c.jsonl": sweep.jsonl(*CHAINS[kind])}
    result = outcome(cli, tmp_path, files, "lint", "c.jsonl", "--format", "concise")
    assert result.exit_code == 1 and "previous_response_id" in result.output


@pytest.mark.parametrize(
    "case",
    [case for case in sweep.shape_cases() if "huge" not in case.name and "long" not in case.name],
)
def test_broken_wire_shapes_never_fail_inside(cli, tmp_path, case):
    outcome(cli, tmp_path, case.files, *case.arguments)


FLEET = [
    ("--replicas", "0"), ("--replicas", "nan"), ("--replicas", "1e9"), ("--replicas", "1,,2"),
    ("--replicas", "2", "--router", "nope"), ("--replicas", "2", "--router", "sglang",
    "--router-param", "sglang.nope=1"), ("--replicas", "2", "--router", "prefix-hash",
    "--router-param", "prefix-hash.prefix_chars=nan"), ("--replicas", "2", "--router",
    "sglang", "--concurrency", "timed", "--prefill-slots", "0"), ("--executor", "x"),
]  # fmt: skip


@pytest.mark.parametrize("extra", FLEET, ids=" ".join)
def test_odd_fleet_and_router_options_are_usage_errors(cli, tmp_path, extra):
    trace = (ROOT / "samples" / "traces" / "requests_tiny.jsonl").read_bytes()
    arguments = ("replay", "t.jsonl", "--simulate", "-o", "out.json", *extra)
    result = outcome(cli, tmp_path, {"t.jsonl": trace}, *arguments)
    assert result.exit_code == 2, result.output


@pytest.mark.parametrize("address", ["", "nope://x"])
def test_a_ray_address_ray_refuses_is_a_usage_error(cli, tmp_path, address):
    pytest.importorskip("ray")
    trace = (ROOT / "samples" / "traces" / "requests_tiny.jsonl").read_bytes()
    arguments = ("replay", "t.jsonl", "--simulate", "--replicas", "2", "--executor", "ray")
    result = outcome(cli, tmp_path, {"t.jsonl": trace}, *arguments, "--ray-address", address)
    assert result.exit_code == 2 and "--ray-address" in result.output


@pytest.mark.parametrize("tokenizer", ["x" * 5000, "nope", "/dev/null", ""])
def test_odd_tokenizer_presets_are_one_line_errors(cli, tmp_path, tokenizer):
    files = {"t.jsonl": sweep.jsonl(sweep.CHAT)}
    result = outcome(cli, tmp_path, files, "lint", "t.jsonl", "-t", tokenizer)
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1


def test_a_kv_cache_smaller_than_a_block_is_a_usage_error():
    pytest.importorskip("torch")
    from pcache.errors import UsageError
    from pcache.serve.app import ServeOptions, build_server

    with pytest.raises(UsageError, match="--kv-cache-tokens must be at least --block-size"):
        build_server(ServeOptions(kv_cache_tokens=1))
