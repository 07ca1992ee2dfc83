"""The fleet simulator predicts the real router: for serial replays through sglang-router
0.3.2 over two `pcache serve --model tiny` replicas, `--router sglang` (cache_aware) and
`--router round-robin` predict each replica's requests, prompt tokens and hit tokens, as the
replicas' /metrics count them, on two shared-prefix chat traces. Serial replays leave the
router no load to follow, so its choices are deterministic and the prediction must be exact.
Poisson arrivals are compared in totals only: there the router follows load, and when a
request lands while another is in flight depends on latencies the simulator approximates
(`bench/router/compare.py` prints both side by side)."""

from __future__ import annotations

import orjson
import pytest

from bench.router.compare import chat_trace, measured, predict, router_workers
from tests.router.conftest import router

REQUESTS, GROUPS, SYSTEM_CHARS = 32, 4, 256
KV_CACHE_TOKENS = 8192  # pcache serve's default on CPU


def reset(replicas) -> None:
    import httpx

    for url in replicas:
        assert httpx.post(f"{url}/reset_prefix_cache", timeout=10).status_code == 200


def replay_through_router(cli, tmp_path, replicas, policy, trace, serial: bool) -> dict:
    reset(replicas)
    with router(policy, replicas, tmp_path / "router.log") as url:
        ordered = router_workers(url)  # the simulator's replica i is the router's worker i
        assert sorted(ordered) == sorted(replicas)
        limit = ["--max-concurrency", "1"] if serial else []
        result = cli(
            "replay", trace, "--endpoint", f"{url}/v1", *limit,
            "--replica-metrics", ",".join(ordered), "--format", "json",
        )  # fmt: skip
    assert result.exit_code == 0, result.output
    data = orjson.loads(result.stdout)
    assert data["completed"] == REQUESTS and data["failed"] == 0
    return measured(data)


@pytest.mark.parametrize("seed", [0, 1], ids=["groups-in-turn", "groups-at-random"])
@pytest.mark.parametrize("policy", ["cache_aware", "round_robin"])
def test_serial_replays_split_and_hit_as_predicted(tmp_path, cli, replicas, policy, seed):
    trace = tmp_path / "chats.jsonl"
    chat_trace(trace, seed, REQUESTS, GROUPS, SYSTEM_CHARS, None)
    real = replay_through_router(cli, tmp_path, replicas, policy, trace, serial=True)
    guess = predict(trace, policy, KV_CACHE_TOKENS)
    assert real["split"] == guess["split"]
    assert real["prompt_tokens"] == guess["prompt_tokens"]
    assert real["hit_tokens"] == guess["hit_tokens"]
    assert real["hit_rate"] == guess["hit_rate"]
    if policy == "cache_aware":  # 0.3.x: below the threshold, least load, ties to the first
        assert guess["split"] == [REQUESTS, 0]
    else:
        assert guess["split"] == [REQUESTS // 2, REQUESTS // 2]


def test_poisson_arrivals_keep_the_totals_and_report_the_split(tmp_path, cli, replicas):
    trace = tmp_path / "chats.jsonl"
    chat_trace(trace, 1, REQUESTS, GROUPS, SYSTEM_CHARS, rate=4.0)
    real = replay_through_router(cli, tmp_path, replicas, "cache_aware", trace, serial=False)
    guess = predict(trace, "cache_aware", KV_CACHE_TOKENS, timing=real)
    assert sum(real["split"]) == sum(guess["split"]) == REQUESTS
    assert sum(real["prompt_tokens"]) == sum(guess["prompt_tokens"])
    assert abs(real["hit_rate"] - guess["hit_rate"]) <= 0.05, (real, guess)
