"""The fleet simulator predicts the real router: for serial replays through sglang-router
0.3.2 over two `pcache serve --model tiny` replicas, `--router sglang` (cache_aware) and
`--router round-robin` predict each replica's requests, prompt tokens and hit tokens, as the
replicas' /metrics count them, on two shared-prefix chat traces: `pcache replay TRACE
--simulate -t tiny --replicas 2 --router sglang|round-robin` on the trace file that is replayed
through the router (`bench.router.compare.prediction_arguments`). Serial replays leave the
router no load to follow, so its choices are deterministic and the prediction must be exact;
so is a replay that holds one long request in flight while short ones arrive far apart (the
router sees loads 1 and 0 at every choice). Poisson arrivals are compared in totals only:
there the router follows load, and when a request lands while another is in flight depends
on latencies the simulator approximates (`bench/router/compare.py` prints both side by
side)."""

from __future__ import annotations

import orjson
import pytest

from bench.router.compare import (
    DEFAULT_TIMING,
    HELD_GAP_MS,
    HELD_GROUPS,
    chat_trace,
    held_trace,
    measured,
    predict,
    router_workers,
)
from tests.router.conftest import reset, router

REQUESTS, GROUPS, SYSTEM_CHARS = 32, 4, 256
KV_CACHE_TOKENS = 8192  # pcache serve's default on CPU
HELD_TRIES = 3


def replay_through_router(
    cli, tmp_path, replicas, policy, trace, serial: bool, count: int = REQUESTS
) -> dict:
    reset(replicas)
    with router(policy, replicas, tmp_path / "router.log") as url:
        ordered = router_workers(url)  # the simulator's replica i is the router's worker i
        assert sorted(ordered) == sorted(replicas)
        limit = ["--max-concurrency", "1"] if serial else []
        result = cli(
            "replay", trace, "--endpoint", f"{url}/v1", *limit,
            "--replica-metrics", ",".join(ordered), "--format", "json", "--ignore-eos",
        )  # fmt: skip
    assert result.exit_code == 0, result.output
    data = orjson.loads(result.stdout)
    assert data["completed"] == count and data["failed"] == 0
    return {**measured(data), "e2els": data["e2els"]}


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


def held_replay(cli, tmp_path, replicas, policy, trace, count: int) -> dict:
    """A replay of `held_trace` in which the long request outlasted every arrival and each
    short one but the last ended before the next arrived; a loaded machine can stretch a
    short one or speed up the long one, so up to `HELD_TRIES` replays are tried."""
    last_arrival_s = (count - 1) * HELD_GAP_MS / 1000
    tries = []
    for _ in range(HELD_TRIES):
        real = replay_through_router(cli, tmp_path, replicas, policy, trace, False, count)
        e2els = real["e2els"]
        if e2els[0] > last_arrival_s and max(e2els[1:-1]) < HELD_GAP_MS / 1000:
            return real
        tries.append([round(seconds, 3) for seconds in e2els])
    raise AssertionError(f"no replay held one request in flight at each arrival: {tries}")


@pytest.mark.parametrize("policy", ["cache_aware", "round_robin"])
def test_a_request_held_in_flight_moves_new_prefixes_to_the_idle_worker(
    tmp_path, cli, replicas, policy
):
    """Loads 1 and 0 at every choice: cache_aware sends the requests below its threshold (new
    system prompts) to the idle worker and the others to the worker its tree names, however
    loaded; round robin alternates. Both as predicted, request for request."""
    trace = tmp_path / "held.jsonl"
    count = held_trace(trace, 0, SYSTEM_CHARS)
    real = held_replay(cli, tmp_path, replicas, policy, trace, count)
    guess = predict(trace, policy, KV_CACHE_TOKENS, timing=DEFAULT_TIMING)
    assert real["split"] == guess["split"] == [3, 3]
    assert real["prompt_tokens"] == guess["prompt_tokens"]
    assert real["hit_tokens"] == guess["hit_tokens"]
    if policy == "cache_aware":  # groups 0, 1, 0, 1, 2, 0: only group 0 is on worker 0
        assert HELD_GROUPS.count(0) == 3


def test_poisson_arrivals_keep_the_totals_and_report_the_split(tmp_path, cli, replicas):
    trace = tmp_path / "chats.jsonl"
    chat_trace(trace, 1, REQUESTS, GROUPS, SYSTEM_CHARS, rate=4.0)
    real = replay_through_router(cli, tmp_path, replicas, "cache_aware", trace, serial=False)
    guess = predict(trace, "cache_aware", KV_CACHE_TOKENS, timing=real)
    assert sum(real["split"]) == sum(guess["split"]) == REQUESTS
    assert sum(real["prompt_tokens"]) == sum(guess["prompt_tokens"])
    assert abs(real["hit_rate"] - guess["hit_rate"]) <= 0.05, (real, guess)
