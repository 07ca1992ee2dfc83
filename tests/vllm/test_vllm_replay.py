"""`pcache replay TRACE --endpoint URL` against a real vLLM: pcache's predicted cached tokens
equal what vLLM reports, request by request, and its prompt lengths equal vLLM's /tokenize.

`default` runs pcache with no -b, -t, --date or --api: it must learn the block size, the
tokenization and the API from the server. `explicit` gives them by hand (-b 32, -t MODEL_DIR,
--date today, --api), which checks the harness and the core prediction. Requests are sent one
at a time (`--max-concurrency 1`: the prediction is a serial replay's) from an empty cache
(vLLM's /reset_prefix_cache before each replay).
"""

from __future__ import annotations

import json
import time

import httpx
import pytest

from tests.conftest import run_pcache
from tests.vllm.traces import write_trace

API = {"chat": "chat", "multi-turn": "chat", "text": "completions", "token-ids": "completions"}
REPLAY_TIMEOUT_S = 600

pytestmark = pytest.mark.vllm


def served_model(url: str) -> str:
    return httpx.get(f"{url}/v1/models", timeout=30).json()["data"][0]["id"]


def tokenize_count(url: str, model: str, body: dict) -> int:
    """vLLM's prompt length of a request body (chat messages or a text prompt)."""
    if "token_ids" in body:
        return len(body["token_ids"])
    request = {"model": model, **body}
    if "messages" in body:
        request["add_generation_prompt"] = True
    response = httpx.post(f"{url}/tokenize", json=request, timeout=30)
    assert response.status_code == 200, response.text
    return response.json()["count"]


def explicit_flags(trace: str, model_dir) -> list[str]:
    flags = ["-b", "32", "--api", API[trace]]
    if trace != "token-ids":
        flags += ["-t", str(model_dir)]
    if API[trace] == "chat":
        flags += ["--date", time.strftime("%Y-%m-%d")]  # the date vLLM's template prints
    return flags


@pytest.mark.parametrize("flags", ["default", "explicit"])
@pytest.mark.parametrize("trace", list(API))
def test_predicted_cached_tokens_equal_vllms(vllm_url, model_dir, tmp_path, record, trace, flags):
    path, bodies = write_trace(trace, tmp_path)
    model = served_model(vllm_url)
    lengths = [tokenize_count(vllm_url, model, body) for body in bodies]
    reset = httpx.post(f"{vllm_url}/reset_prefix_cache", timeout=60)
    assert reset.status_code == 200, reset.text
    arguments = [path, "--endpoint", f"{vllm_url}/v1", "--format", "json"]
    arguments += ["--max-concurrency", "1", "--max-output-tokens", "4", "--no-progress"]
    if flags == "explicit":
        arguments += explicit_flags(trace, model_dir)
    done = run_pcache("replay", *arguments, timeout=REPLAY_TIMEOUT_S)
    assert done.returncode == 0, done.stderr.decode()
    report = json.loads(done.stdout)
    served = report["cached_tokens"]
    predicted = report["predicted_cached_tokens"]
    counted = report["input_lens"]
    for index in range(len(bodies)):
        record(
            {
                "trace": trace,
                "flags": flags,
                "request": index,
                "vllm_tokenize": lengths[index],
                "pcache_prompt": counted[index],
                "vllm_cached": served[index],
                "pcache_predicted": predicted[index],
            }
        )
    assert report["completed"] == len(bodies), report.get("errors")
    assert sum(c or 0 for c in served) > 0, "the trace should hit vLLM's cache"
    assert counted == lengths, "pcache's prompt lengths differ from vLLM's /tokenize"
    assert predicted == served, "pcache's predicted cached tokens differ from vLLM's"
