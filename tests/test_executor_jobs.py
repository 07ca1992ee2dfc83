"""`--jobs N` and `--executor` change where the render/tokenize/hash stage runs, never what it
computes: the JSON output of `replay --simulate`, `diff` and `lint` is byte for byte that of
`--jobs 1`, and a log read shard by shard is the log read whole. (The same with a real Ray
cluster: tests/test_executor_ray.py.)"""

from __future__ import annotations

import dataclasses
import socket
import sys
import time

import pytest

from pcache.executors.local import LocalExecutor
from pcache.traces.readers import read_trace
from pcache.traces.sharded import read_trace_sharded
from tests.conftest import SAMPLES, run_pcache
from tests.executor_logs import request_log
from tests.fixtures import hf_model_dir

RAY = ("--executor", "ray")


class ShardingExecutor(LocalExecutor):
    """In-process, but cuts logs into shards as a distributed executor does."""

    distributed = True
    tasks = 0

    def map(self, function, items, *arguments):
        for result in super().map(function, items, *arguments):
            ShardingExecutor.tasks += 1
            yield result


def tokenizer_of(name: str) -> str:
    return name if name == "gpt-oss" else str(hf_model_dir(name))


def stdout_of(*args) -> bytes:
    done = run_pcache(*args, timeout=300)
    assert done.returncode in (0, 1), done.stderr.decode()[-2000:]
    return done.stdout


@pytest.mark.parametrize("tokenizer", ["gpt-oss", "llama3.1"])
def test_replay_simulate_is_the_same_for_any_jobs(tmp_path, tokenizer):
    log = request_log(tmp_path / "log.jsonl")
    common = ("replay", log, "--simulate", "-t", tokenizer_of(tokenizer), "--format", "json")
    one = stdout_of(*common, "--jobs", "1")
    assert b'"requests"' in one
    assert stdout_of(*common, "--jobs", "2") == one
    assert stdout_of(*common) == one  # the default: one thread per core


def test_replay_of_replicas_is_the_same_for_any_jobs(tmp_path):
    log = request_log(tmp_path / "log.jsonl")
    common = ("replay", log, "--replicas", "2", "--router", "sglang", "--format", "json")
    assert stdout_of(*common, "--jobs", "1") == stdout_of(*common, "--jobs", "3")


def test_diff_is_the_same_for_any_jobs():
    common = ("diff", SAMPLES / "a.json", SAMPLES / "b.json", "--format", "json")
    one = stdout_of(*common, "--jobs", "1")
    assert b'"first_divergence_token"' in one
    assert stdout_of(*common, "--jobs", "2") == one


def test_diff_reports_a_bad_side_as_with_one_job(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    for jobs in ("1", "2"):
        done = run_pcache("diff", SAMPLES / "a.json", bad, "--jobs", jobs)
        assert done.returncode == 2
        assert done.stderr.decode().count("\n") == 1 and f"{bad}:1:2" in done.stderr.decode()


def comparable(trace) -> dict:
    return {
        "records": [dataclasses.asdict(record) for record in trace.records],
        "skipped": trace.skipped,
        "reordered": trace.reordered,
        "has_timestamps": trace.has_timestamps,
        "format": trace.format,
        "source": trace.source,
    }


@pytest.mark.parametrize("chain", [False, True])
@pytest.mark.parametrize("shard_bytes", ["2000", "30000"])
def test_a_log_read_in_shards_is_the_log_read_whole(tmp_path, monkeypatch, chain, shard_bytes):
    from pcache.executors.shards import shards_of_file
    from pcache.pipeline import Settings

    log = request_log(tmp_path / "log.jsonl", chain=chain)
    monkeypatch.setenv("PCACHE_SHARD_BYTES", shard_bytes)
    assert len(shards_of_file(str(log))) > 3
    settings = Settings(tokenizer=str(hf_model_dir("llama3.1")))
    whole = read_trace(str(log), settings=settings)
    ShardingExecutor.tasks = 0
    sharded = read_trace_sharded(str(log), ShardingExecutor(), settings=settings)
    assert comparable(sharded) == comparable(whole)
    assert whole.skipped and whole.reordered and len(whole.records) > 200
    shards = len(shards_of_file(str(log)))
    assert ShardingExecutor.tasks == (shards + 1 if chain else shards)  # a chain: once whole


def test_strict_stops_at_the_first_bad_line_of_any_shard(tmp_path, monkeypatch):
    from pcache.errors import InputError

    log = request_log(tmp_path / "log.jsonl", chain=False)
    monkeypatch.setenv("PCACHE_SHARD_BYTES", "2000")
    with pytest.raises(InputError) as whole:
        read_trace(str(log), strict=True)
    with pytest.raises(InputError) as sharded:
        read_trace_sharded(str(log), ShardingExecutor(), strict=True)
    assert str(sharded.value) == str(whole.value)


def test_a_directory_of_logs_is_one_log_in_name_order(tmp_path, cli):
    import orjson

    log = request_log(tmp_path / "log.jsonl", chain=False)
    lines = log.read_text().splitlines(keepends=True)
    folder = tmp_path / "logs"
    (folder / "b").mkdir(parents=True)
    (folder / "a.jsonl").write_text("".join(lines[:100]))
    (folder / "b" / "c.jsonl").write_text("".join(lines[100:]))
    (folder / "notes.txt").write_text("not a log")
    whole = cli("replay", log, "--format", "json")
    split = cli("replay", folder, "--format", "json")
    assert whole.exit_code == split.exit_code == 0, split.output
    expected, got = orjson.loads(whole.stdout), orjson.loads(split.stdout)
    assert got.pop("source") == str(folder) and expected.pop("source") == str(log)
    assert got == expected


def test_lint_with_remote_pieces_is_lint(tmp_path, monkeypatch, cli):
    """`--executor ray`'s lint path (tables of piece ids computed per shard), in-process."""
    import pcache.executors

    log = request_log(tmp_path / "log.jsonl")
    monkeypatch.setenv("PCACHE_SHARD_BYTES", "5000")
    args = ("lint", log, "-t", hf_model_dir("llama3.1"), "--format", "json", "--exit-zero")
    local = cli(*args)
    monkeypatch.setattr(pcache.executors, "executor_of", lambda *_: ShardingExecutor())
    ShardingExecutor.tasks = 0
    remote = cli(*args, "--executor", "ray")
    assert remote.exit_code == local.exit_code == 0, remote.output
    assert remote.stdout == local.stdout and '"findings"' in local.stdout
    assert ShardingExecutor.tasks > 3


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("lint", SAMPLES / "prompts", "--jobs", "0"), "--jobs"),
        (("replay", SAMPLES / "traces" / "requests_tiny.jsonl", "--jobs", "0"), "--jobs"),
        (("lint", SAMPLES / "prompts", "--jobs", "1025"), "1024"),
        (("diff", SAMPLES / "prompts" / "review_request.json", "--jobs", "100000"), "1024"),
        (("lint", SAMPLES / "prompts", "--executor", "spark"), "--executor must be"),
        (
            ("replay", SAMPLES / "traces" / "requests_tiny.jsonl", "--executor", "spark"),
            "--executor must be local or ray",
        ),
        (
            ("replay", SAMPLES / "traces" / "requests_tiny.jsonl", "--ray-address", "auto"),
            "--ray-address applies to --executor ray",
        ),
        (
            ("replay", SAMPLES / "traces" / "requests_tiny.jsonl", "--engine", "cpu", *RAY),
            "--executor ray applies to --simulate",
        ),
    ],
)
def test_bad_executor_options_are_one_line_and_exit_2(cli, args, message):
    result = cli(*args)
    assert result.exit_code == 2, result.output
    assert message in result.output and result.output.count("\n") <= 2, result.output


def test_ray_not_installed_is_one_line_and_exit_2(cli, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    for command in ("lint", "replay"):
        result = cli(command, SAMPLES / "traces" / "requests_tiny.jsonl", "--executor", "ray")
        assert result.exit_code == 2, result.output
        assert "pip install 'pcache[ray]'" in result.output, result.output
        assert "Traceback" not in result.output


def test_an_unreachable_ray_address_is_one_line_and_exit_2(cli):
    ray = pytest.importorskip("ray")
    if ray.is_initialized():
        pytest.skip("this process has joined a Ray cluster already")
    with socket.socket() as probe:  # a loopback port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    started = time.monotonic()
    result = cli(
        "lint", SAMPLES / "prompts", "--executor", "ray", "--ray-address", f"127.0.0.1:{port}"
    )
    assert time.monotonic() - started < 30
    assert result.exit_code == 2, result.output
    assert f"--ray-address 127.0.0.1:{port}: nothing accepts connections" in result.output
    assert "Traceback" not in result.output
