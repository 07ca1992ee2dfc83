"""vLLM's own KV event stream (`--kv-events-config`), received by `replay --endpoint URL
--kv-events` and checked block by block against pcache's pool: what vLLM stored is what the
prediction stored, by token blocks and, where pcache implements vLLM's hash, by hash."""

from __future__ import annotations

import json

import pytest

from tests.conftest import run_pcache
from tests.vllm.traces import write_trace

pytestmark = pytest.mark.vllm
pytest.importorskip("zmq")
pytest.importorskip("msgpack")


@pytest.mark.parametrize("trace", ["token-ids", "chat"])
def test_vllms_kv_events_are_the_pools(vllm_url, vllm_kv_events, tmp_path, record, trace):
    path, _ = write_trace(trace, tmp_path)
    result = run_pcache(
        "replay", str(path), "--endpoint", f"{vllm_url}/v1", "--kv-events", vllm_kv_events,
        "--max-output-tokens", "1", "--max-concurrency", "1", "--reset-cache", "--format", "json",
        timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    data = json.loads(result.stdout)
    check = data["kv_events"]
    record(
        {
            "test": f"kv-events/{trace}",
            "events": sum(check["events_received"].values()),
            "stored_matched": check["stored_matched"],
            "removed_matched": check["removed_matched"],
            "hashes_compared": check["hashes_compared"],
            "mismatches": check["mismatches"],
        }
    )
    assert check["events_received"].get("BlockStored", 0) > 0
    assert check["stored_matched"] > 0 and check["missed_batches"] == 0
    assert check["mismatches"] == 0, check
