"""`pcache replay --endpoint` against a real `pcache serve --model tiny` on a loopback port."""

from __future__ import annotations

import os
import random
import signal
import statistics
import subprocess
import sys
import time

import orjson
import pytest

pytest.importorskip("torch")
pytest.importorskip("httpx")
pytest.importorskip("uvicorn")

from tests.conftest import ROOT
from tests.serve_helpers import metric, serve_process

PAIRS = 6
LONG = 1000  # tokens: 16 chunked-prefill steps of 64 for a miss, 1 for a hit


@pytest.fixture(scope="module")
def url():
    """One `pcache serve --model tiny` child for the module; each test resets its cache."""
    with serve_process("--model", "tiny", "--max-num-batched-tokens", "64") as base:
        yield base


def write_trace(path, lines) -> None:
    path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))


def serving_trace(path) -> tuple[list[int], list[int]]:
    """Shared-prefix requests, then pairs (a miss, then a hit of the same length); the
    indices of the misses and of the hits."""
    rng = random.Random(7)
    system = [rng.randrange(512) for _ in range(300)]
    lines = []
    for _ in range(4):
        lines.append({"token_ids": system + [rng.randrange(512) for _ in range(37)]})
    misses, hits = [], []
    for _ in range(PAIRS):
        prompt = [rng.randrange(512) for _ in range(LONG)]
        misses.append(len(lines))
        lines.append({"token_ids": prompt})
        hits.append(len(lines))
        lines.append({"token_ids": prompt[:-8] + [rng.randrange(512) for _ in range(8)]})
    for index, line in enumerate(lines):
        line.update(timestamp=index, output_length=4)  # ms apart: serial under concurrency 1
    write_trace(path, lines)
    return misses, hits


def test_replay_of_pcache_serve_matches_the_prediction_metrics_and_ttft(tmp_path, cli, url):
    trace = tmp_path / "trace.jsonl"
    misses, hits = serving_trace(trace)
    per_request = tmp_path / "per_request.jsonl"
    result = cli(
        "replay", trace, "--endpoint", f"{url}/v1", "--model", "tiny", "--reset-cache",
        "--max-concurrency", "1", "--cache-blocks", "512", "--ignore-eos",
        "--format", "json", "-o", per_request,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    data = orjson.loads(result.stdout)
    count = 4 + 2 * PAIRS
    assert data["num_prompts"] == data["completed"] == count and data["failed"] == 0
    assert data["errors"] == [""] * count and data["output_lens"] == [4] * count
    assert data["server_kind"] == "pcache"
    assert data["cached_tokens_field"] == "usage.prompt_tokens_details.cached_tokens"
    # the server's per-request counts are the simulator's, request by request
    assert data["cached_tokens"] == data["predicted_cached_tokens"]
    assert data["cached_tokens_match"] is True and data["mismatched_requests"] == []
    assert data["cached_tokens"][1:4] == [288] * 3  # 300 shared tokens: 18 full blocks
    assert [data["cached_tokens"][i] for i in hits] == [992] * PAIRS
    assert [data["cached_tokens"][i] for i in misses] == [0] * PAIRS
    # the engine's own counters (its pool's statistics) against the client's totals
    metrics = data["server_metrics"]
    assert metrics["delta"]["prefix_cache_hits"] == data["total_cached_tokens"]
    assert metrics["delta"]["prefix_cache_queries"] == data["total_input_tokens"]
    assert metrics["delta"]["generation_tokens"] == data["total_output_tokens"] == 4 * count
    assert metrics["client"]["prompt_tokens"] == sum(data["input_lens"])
    # a hit prefills 8 tokens in one step, a miss 1000 in 16: hits come first at the median
    miss_ttft = statistics.median(data["ttfts"][i] for i in misses)
    hit_ttft = statistics.median(data["ttfts"][i] for i in hits)
    assert hit_ttft < miss_ttft, (hit_ttft, miss_ttft)
    assert all(data["first_chunk_times"][i] <= data["ttfts"][i] for i in range(count))
    for key in ("median_ttft_ms", "p99_ttft_ms", "mean_tpot_ms", "p90_itl_ms", "p95_e2el_ms"):
        assert data[key] > 0
    assert data["max_concurrent_requests"] == 1
    rows = [orjson.loads(line) for line in per_request.read_bytes().splitlines()]
    assert [row["cached_tokens"] for row in rows] == data["cached_tokens"]


def test_compare_cache_on_pcache_serve_turns_the_cache_off_with_salts(tmp_path, cli, url):
    trace = tmp_path / "trace.jsonl"
    serving_trace(trace)
    result = cli(
        "replay", trace, "--endpoint", f"{url}/v1", "--max-concurrency", "1",
        "--cache-blocks", "512", "--max-output-tokens", "2", "--compare-cache",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "cache comparison (salted)" in result.stdout
    assert "/reset_prefix_cache" in result.stdout
    assert "(match)" in result.stdout  # --model came from /v1/models


def finished(url: str) -> float:
    import httpx

    text = httpx.get(f"{url}/metrics").text
    return metric(text, "pcache:request_success_total", finished_reason="length")


def test_ctrl_c_prints_what_was_measured(tmp_path, url):
    trace = tmp_path / "trace.jsonl"
    write_trace(tmp_path / "trace.jsonl", [{"token_ids": [1, 2, 3, i]} for i in range(40)])
    command = [sys.executable, "-m", "pcache", "replay", str(trace), "--endpoint", f"{url}/v1"]
    before = finished(url)
    child = subprocess.Popen(
        [*command, "--rate", "5", "--max-output-tokens", "2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    try:
        deadline = time.monotonic() + 30
        while finished(url) < before + 3:  # interrupt once a few requests are done
            assert time.monotonic() < deadline and child.poll() is None
            time.sleep(0.05)
        child.send_signal(signal.SIGINT)
        stdout, stderr = child.communicate(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(timeout=10)
    assert child.returncode == 130, stderr.decode()
    text = stdout.decode()
    assert "interrupted" in text and "of 40 requests completed" in text
    done = int(text.split(" of 40 requests completed")[0].rsplit(maxsplit=1)[-1])
    assert 0 < done < 40
    assert b"Traceback" not in stderr


def test_readme_serving_commands(tmp_path):
    import shlex

    from tests.conftest import run_pcache
    from tests.test_readme import SERVING, local_arguments

    serve = [command for command in SERVING if command.startswith("pcache serve")]
    replays = [command for command in SERVING if command not in serve]
    assert len(serve) == 1 and replays
    arguments = shlex.split(serve[0].removesuffix("&"))[2:]
    port = arguments.index("--port")
    readme_url = f"http://127.0.0.1:{arguments[port + 1]}"
    del arguments[port : port + 2]
    with serve_process(*arguments) as url:
        for command in replays:
            words = local_arguments(shlex.split(command.replace(readme_url, url))[1:], tmp_path)
            result = run_pcache(*words, timeout=120)
            assert result.returncode == 0, (command, result.stderr.decode()[-2000:])
            assert b"Traceback" not in result.stderr


def test_a_request_trace_tokenized_for_another_vocabulary_is_mapped_into_the_servers(cli, url):
    trace = ROOT / "samples/traces/requests_tiny.jsonl"
    common = ("replay", trace, "--endpoint", f"{url}/v1", "--reset-cache", "--time-scale", "0")
    common = (*common, "-t", "cl100k_base", "--api", "completions")
    refused = cli(*common, "--max-concurrency", "1", "--max-output-tokens", "1")
    assert refused.exit_code == 1 and "token ids must be in [0, 512)" in refused.stderr
    result = cli(
        *common, "--vocab-size", "512", "--max-concurrency", "1", "--max-output-tokens", "1",
        "--format", "json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    data = orjson.loads(result.stdout)
    assert data["completed"] == data["num_prompts"] > 1
    assert data["cached_tokens"] == data["predicted_cached_tokens"]
    assert data["total_cached_tokens"] > 0


def test_with_no_flags_request_traces_are_exact_against_pcache_serve(tmp_path, cli, url):
    """Chat messages and text prompts, no -t, -b or --api: the server's /tokenize, block
    size and chat template are the prediction's, request by request."""
    import httpx

    probe = httpx.post(f"{url}/tokenize", json={"model": "tiny", "prompt": "hi"}, timeout=30)
    if probe.status_code == 404:
        pytest.skip("this pcache serve has no /tokenize")
    text_trace = tmp_path / "text.jsonl"
    shared = "Every request starts with this same preamble of some length. " * 6
    write_trace(text_trace, [{"prompt": shared + f"Question {i}?"} for i in range(3)])
    chat_trace = ROOT / "samples/traces/requests_tiny.jsonl"
    for trace, backend in ((chat_trace, "openai-chat"), (text_trace, "openai")):
        result = cli(
            "replay", trace, "--endpoint", f"{url}/v1", "--reset-cache", "--max-concurrency",
            "1", "--time-scale", "0", "--max-output-tokens", "2", "--format", "json",
        )  # fmt: skip
        assert result.exit_code == 0, result.output
        data = orjson.loads(result.stdout)
        assert data["backend"] == backend
        assert data["tokenization"] == "the server's /tokenize", data["notes"]
        assert data["completed"] == data["num_prompts"]
        assert data["pcache_input_lens"] == data["input_lens"]
        assert data["prompt_tokens_mismatch"] is None, data["notes"]
        assert data["cached_tokens"] == data["predicted_cached_tokens"]
        assert sum(data["cached_tokens"]) > 0
        assert data["block_size"] == 16
        assert data["block_size_source"] == "the server (pcache:cache_config_info in /metrics)"
