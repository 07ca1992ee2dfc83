"""`replay --endpoint ROUTER` through SGLang's router over two pcache serve replicas, with
default flags: the model the router lists as `unknown` is taken from the replicas, and each
replica's /metrics says how many requests it served and how many prompt tokens it hit."""

from __future__ import annotations

import random

import orjson
import pytest

from tests.router.conftest import reset, router


def chat_trace(path, groups: int = 2, per_group: int = 4) -> int:
    """Shared-system-prompt chats, groups interleaved; the number of requests."""
    rng = random.Random(11)
    words = ["alpha", "beta", "gamma", "delta", "omega", "sigma", "kappa", "theta"]
    systems = [" ".join(rng.choice(words) for _ in range(120)) for _ in range(groups)]
    lines = []
    for turn in range(per_group):
        for group in range(groups):
            question = " ".join(rng.choice(words) for _ in range(12))
            lines.append(
                {
                    "timestamp": len(lines),
                    "output_length": 2,
                    "messages": [
                        {"role": "system", "content": systems[group]},
                        {"role": "user", "content": f"{turn}: {question}"},
                    ],
                }
            )
    path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    return len(lines)


def serial_replay(cli, trace, policy: str, replicas, log):
    """The result of `pcache replay TRACE --endpoint ROUTER/v1 --replica-metrics ... --format json`,
    one request at a time, from empty prefix caches."""
    reset(replicas)
    with router(policy, replicas, log) as url:
        return cli(
            "replay", trace, "--endpoint", f"{url}/v1", "--max-concurrency", "1",
            "--replica-metrics", ",".join(replicas), "--format", "json",
        )  # fmt: skip


@pytest.mark.parametrize("policy", ["round_robin", "cache_aware"])
def test_a_serial_replay_through_the_router_counts_each_replica(tmp_path, cli, replicas, policy):
    trace = tmp_path / "chats.jsonl"
    count = chat_trace(trace)
    result = serial_replay(cli, trace, policy, replicas, tmp_path / "router.log")
    assert result.exit_code == 0, result.output
    data = orjson.loads(result.stdout)
    assert data["completed"] == count and data["failed"] == 0
    assert data["model_id"] == "tiny"
    rows = data["replicas"]
    assert [row["error"] for row in rows] == [None, None]
    assert sum(row["requests"] for row in rows) == count
    cached = data["cached_tokens"]
    assert sum(row["hit_tokens"] for row in rows) == sum(cached)
    assert sum(row["prompt_tokens"] for row in rows) == sum(data["input_lens"])
    if policy == "round_robin":
        # alternating: one replica served the even requests, the other the odd ones
        assert sorted(row["requests"] for row in rows) == [count // 2, count - count // 2]
        halves = sorted([sum(cached[0::2]), sum(cached[1::2])])
        assert sorted(row["hit_tokens"] for row in rows) == halves


def test_text_prompts_pass_through_the_router_as_text(tmp_path, cli, replicas):
    """SGLang's router takes a completion's prompt as text only: a text trace is sent as its
    text, tokenized for the prediction by a replica's /tokenize."""
    rng = random.Random(5)
    system = " ".join(rng.choice(["north", "south", "east", "west"]) for _ in range(150))
    lines = [
        {"timestamp": index, "output_length": 2, "prompt": f"{system} question {index}?"}
        for index in range(6)
    ]
    trace = tmp_path / "text.jsonl"
    trace.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    result = serial_replay(cli, trace, "round_robin", replicas, tmp_path / "router.log")
    assert result.exit_code == 0, result.output
    data = orjson.loads(result.stdout)
    assert data["completed"] == len(lines) and data["tokenization"] == "the server's /tokenize"
    assert data["input_lens"] == data["pcache_input_lens"]
    assert sorted(row["requests"] for row in data["replicas"]) == [3, 3]
