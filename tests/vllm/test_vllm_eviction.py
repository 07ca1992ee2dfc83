"""A real vLLM whose KV pool cannot hold the trace (`EVICTION_BLOCKS`): pcache's prediction
with no capacity flag equals vLLM's cached tokens request by request when requests come one at
a time, its pool's evictions are vLLM's (KV events), and when requests overlap the timed
prediction is replayed on the run's own timeline, every request that differs named with its
reason. How close the timed prediction comes depends on how well the client's clock shows the
server's steps (`pcache.replayer.endpoint.timeline`); the table records the error of both
predictions, and `bench/vllm/fidelity.py` measures it over traces and pool sizes.

pcache learns the pool from vLLM's `cache_config_info` (`num_gpu_blocks`, less the null block
vLLM never fills); nothing here gives `--cache-blocks`.
"""

from __future__ import annotations

import json
import socket

import pytest

from tests.conftest import run_pcache
from tests.vllm.conftest import vllm_venv
from tests.vllm.traces import EVICTION_BLOCKS, write_trace

pytestmark = pytest.mark.vllm
REPLAY_TIMEOUT_S = 600
MAX_MEAN_ERROR_POINTS = 10.0
"""A bound that only a broken timed replay crosses (runs on 2 cores measure 0 to 5)."""


@pytest.fixture(scope="module")
def small_vllm(model_dir):
    """(base URL, KV events endpoint) of a vLLM with a pool of `EVICTION_BLOCKS` blocks."""
    import os

    from bench.vllm.server import VllmStartError, vllm_server

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        events = f"tcp://127.0.0.1:{probe.getsockname()[1]}"
    venv = vllm_venv()
    assert not isinstance(venv, str), venv
    timeout = float(os.environ.get("PCACHE_VLLM_START_TIMEOUT", "600"))
    log = model_dir.parent / "vllm-small.log"
    try:
        with vllm_server(
            venv, model_dir, log, timeout, kv_events=events, num_gpu_blocks=EVICTION_BLOCKS
        ) as server:
            print(f"\nvLLM ({EVICTION_BLOCKS} blocks) pid {server.pid} on {server.url}", flush=True)
            yield server.url, events
    except VllmStartError as error:
        pytest.fail(str(error))


def replay(url: str, events: str, trace, *flags: str) -> dict:
    arguments = [trace, "--endpoint", f"{url}/v1", "--api", "completions", "--reset-cache"]
    arguments += ["--kv-events", events, "--max-output-tokens", "1", "--format", "json"]
    done = run_pcache("replay", *arguments, "--no-progress", *flags, timeout=REPLAY_TIMEOUT_S)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    return json.loads(done.stdout)


def record_rows(record, case: str, report: dict) -> None:
    reasons = report["request_miss_reasons"]
    for index, served in enumerate(report["cached_tokens"]):
        record(
            {
                "case": case,
                "request": index,
                "prompt": report["input_lens"][index],
                "vllm_cached": served,
                "pcache_predicted": report["predicted_cached_tokens"][index],
                "serial": report["predicted_serial_cached_tokens"][index],
                "reasons": json.dumps(reasons[index]["tokens"]) if reasons[index] else "",
            }
        )


def mean_error_points(report: dict, key: str = "predicted_cached_tokens") -> float:
    errors = [
        abs(served - predicted) / length * 100
        for served, predicted, length in zip(
            report["cached_tokens"],
            report[key],
            report["input_lens"],
            strict=True,
        )
    ]
    return sum(errors) / len(errors)


def check_reasons_add_up(report: dict) -> None:
    for index, reasons in enumerate(report["request_miss_reasons"]):
        missed = report["input_lens"][index] - report["cached_tokens"][index]
        assert sum(reasons["tokens"].values()) == missed, (index, reasons)
    total = report["miss_reasons"]
    assert sum(total.values()) == sum(report["input_lens"]) - sum(report["cached_tokens"])


def test_a_full_pool_is_predicted_with_no_capacity_flag(small_vllm, tmp_path, record):
    url, events = small_vllm
    path, bodies = write_trace("eviction", tmp_path)
    report = replay(url, events, path, "--max-concurrency", "1")
    record_rows(record, "eviction/serial", report)
    assert report["completed"] == len(bodies), report.get("errors")
    assert report["capacity_blocks"] == EVICTION_BLOCKS - 1
    assert "num_gpu_blocks" in report["capacity_source"]
    assert report["prediction_mode"] == "serial"
    check = report["kv_events"]
    assert check["removed_matched"] > 0, "the trace should make vLLM evict"
    assert check["mismatches"] == 0, check
    assert report["predicted_cached_tokens"] == report["cached_tokens"]
    assert report["miss_reasons"]["evicted"] > 0
    check_reasons_add_up(report)


def test_overlapping_requests_are_predicted_on_the_runs_timeline(small_vllm, tmp_path, record):
    url, events = small_vllm
    path, bodies = write_trace("eviction", tmp_path)
    report = replay(url, events, path, "--max-concurrency", "4", "--rate", "inf")
    record_rows(record, "eviction/4 at a time", report)
    assert report["completed"] == len(bodies), report.get("errors")
    assert report["max_concurrent_requests"] > 1
    assert report["prediction_mode"] == "timed"
    error = mean_error_points(report)
    serial = mean_error_points(report, "predicted_serial_cached_tokens")
    record({"case": "eviction/4 at a time", "mean_error_points": round(error, 3)})
    record({"case": "eviction/4 at a time, serial", "mean_error_points": round(serial, 3)})
    assert error <= MAX_MEAN_ERROR_POINTS
    check_reasons_add_up(report)
    differing = {
        index
        for index, (served, predicted) in enumerate(
            zip(report["cached_tokens"], report["predicted_cached_tokens"], strict=True)
        )
        if served != predicted
    }
    named = {difference["request"] for difference in report["prediction_differences"]}
    assert named == differing
