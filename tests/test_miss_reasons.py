"""Every missed token has a reason: `replay --simulate` with a limited or timed cache splits
the tokens a request recomputes into never cached, evicted (naming the admission that evicted
them), not yet published (naming the request still prefilling them) and the prompt's last
block; the reasons add up to the missed tokens, request by request and in total, and
explaining misses never changes what is cached."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pcache.replayer.miss_reasons import REASONS, reason_tokens, summary_line
from pcache.replayer.simulate.driver import SimulationOptions, simulate
from pcache.traces.record import Trace, TraceRecord


def hash_trace(prompts: list[list[int]], block_size: int = 4, gap_ms: float = 1.0) -> Trace:
    records = [
        TraceRecord(i, None, i * gap_ms, len(ids) * block_size, 2, hash_ids=list(ids))
        for i, ids in enumerate(prompts)
    ]
    return Trace("t", "mooncake", block_size, records)


def token_trace(prompts: list[list[int]], gap_ms: float = 1.0) -> Trace:
    records = [
        TraceRecord(i, None, i * gap_ms, len(ids), 2, token_ids=list(ids))
        for i, ids in enumerate(prompts)
    ]
    return Trace("t", "requests", None, records)


def explained(trace: Trace, **given) -> list:
    options = SimulationOptions(policy="vllm", explain_misses=True, **given)
    report = simulate(trace, options, keep_requests=True)
    return report, report.per_request


def test_an_evicted_prefix_names_the_admission_that_evicted_it():
    a, b = [1, 2, 3], [7, 8, 9]
    report, outcomes = explained(hash_trace([a, b, a]), cache_blocks=3)
    assert [o.cached_tokens for o in outcomes] == [0, 0, 0]
    assert reason_tokens(outcomes[0].miss_reasons) == {"never_cached": 12}
    assert reason_tokens(outcomes[2].miss_reasons) == {"evicted": 12}
    assert outcomes[2].miss_reasons.evicted_by == [1]
    assert report.miss_reasons == dict.fromkeys(REASONS, 0) | {"never_cached": 24, "evicted": 12}
    # with room for both, the third is a hit and nothing is missed
    _, roomy = explained(hash_trace([a, b, a]), cache_blocks=6)
    assert roomy[2].cached_tokens == 12 and reason_tokens(roomy[2].miss_reasons) == {}


def test_a_changed_block_breaks_the_chain_after_it():
    _, outcomes = explained(hash_trace([[1, 2, 3, 4], [1, 9, 3, 4]]), cache_blocks=8)
    assert outcomes[1].cached_tokens == 4
    # block 9 was never cached; 3 and 4 are in the pool but behind it: the same reason
    assert reason_tokens(outcomes[1].miss_reasons) == {"never_cached": 12}


def test_token_prompts_recompute_their_last_block():
    shared = list(range(100, 140))  # 2.5 blocks of 16
    _, outcomes = explained(token_trace([[*shared, 1], [*shared, 2, 3]]), cache_blocks=64)
    assert outcomes[1].cached_tokens == 32
    assert reason_tokens(outcomes[1].miss_reasons) == {"last_block": 10}


def test_a_prefix_still_being_prefilled_is_not_yet_published():
    """Timed, SGLang's rule (blocks are hits once the prefill ends): a request that comes while
    the first still prefills the same prefix recomputes it, and names that request."""
    prompt = [1, 2, 3, 4, 5, 6, 7, 8]
    trace = hash_trace([prompt, prompt], block_size=64, gap_ms=0.5)
    _, outcomes = explained(trace, concurrency="timed", publish_blocks="prefilled", cache_blocks=64)
    assert reason_tokens(outcomes[1].miss_reasons) == {"not_yet_published": 512}
    assert outcomes[1].miss_reasons.prefilling == [0]
    # vLLM's rule: usable from scheduling, a hit
    _, scheduled = explained(trace, concurrency="timed", publish_blocks="scheduled")
    assert scheduled[1].cached_tokens == 512


prompts = st.lists(st.lists(st.integers(0, 12), min_size=1, max_size=10), min_size=1, max_size=25)


@given(prompts, st.integers(10, 40), st.sampled_from(["serial", "timed"]))
@settings(max_examples=80, deadline=None)
def test_reasons_add_up_and_explaining_changes_nothing(prompts, blocks, concurrency):
    trace = hash_trace(prompts)
    report, outcomes = explained(trace, cache_blocks=blocks, concurrency=concurrency)
    for outcome in outcomes:
        missed = outcome.prompt_tokens - outcome.cached_tokens
        assert sum(reason_tokens(outcome.miss_reasons).values()) == missed
    assert sum(report.miss_reasons.values()) == report.query_tokens - report.hit_tokens
    plain = simulate(
        hash_trace(prompts),
        SimulationOptions(policy="vllm", cache_blocks=blocks, concurrency=concurrency),
        keep_requests=True,
    )
    assert [o.cached_tokens for o in plain.per_request] == [o.cached_tokens for o in outcomes]
    assert plain.evicted_blocks == report.evicted_blocks
    if not report.evicted_blocks:
        assert report.miss_reasons["evicted"] == 0


def test_the_summary_line_orders_reasons_and_says_none():
    assert summary_line(dict.fromkeys(REASONS, 0)) == "missed tokens: none"
    line = summary_line(dict.fromkeys(REASONS, 0) | {"evicted": 30, "never_cached": 10})
    assert line == "missed tokens: 40: evicted 30 (75.0%), never cached 10 (25.0%)"


def test_the_command_explains_a_limited_timed_cache(cli, tmp_path):
    trace = tmp_path / "trace.jsonl"
    lines = [
        {"timestamp": 10 * i, "input_length": 2048, "output_length": 4, "hash_ids": ids}
        for i, ids in enumerate([[0, 1, 2, 3], [4, 5, 6, 7], [0, 1, 2, 3], [0, 1, 8, 9]])
    ]
    trace.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    common = ("replay", trace, "--simulate", "--cache-blocks", "5")
    result = cli(*common, "--concurrency", "timed", "--format", "json", "-o", tmp_path / "o.jsonl")
    assert result.exit_code == 0, result.output
    data = orjson.loads(result.stdout)
    report = data["reports"][0] if "reports" in data else data
    reasons = report["miss_reasons"]
    assert sum(reasons.values()) == report["query_tokens"] - report["hit_tokens"]
    assert reasons["evicted"] > 0 and reasons["never_cached"] > 0
    rows = [orjson.loads(line) for line in (tmp_path / "o.jsonl").read_bytes().splitlines()]
    for row in rows:
        missed = row["prompt_tokens"] - row["cached_tokens"]
        assert sum(row["miss_reasons"]["tokens"].values()) == missed
    text = cli(*common)
    assert text.exit_code == 0, text.output
    assert "missed tokens" in text.stdout and "evicted" in text.stdout
    # the report's timeline colours the file's misses by reason
    requests = tmp_path / "requests.jsonl"
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hello"}]}
    requests.write_bytes(orjson.dumps(body) + b"\n")
    page = tmp_path / "page.html"
    result = cli("report", requests, "--replay", tmp_path / "o.jsonl", "-o", page)
    assert result.exit_code == 0, result.output
    html = page.read_text()
    assert "missed: evicted" in html and "missed: never cached" in html


@pytest.mark.parametrize("value", ['"x"', "[1]"])
def test_a_replay_file_with_malformed_reasons_is_refused(cli, tmp_path, value):
    path = tmp_path / "o.jsonl"
    line = (
        '{"index": 0, "prompt_tokens": 4, "cached_tokens": 0, "ttft_ms": 1, "ttft_uncached_ms": 1'
    )
    path.write_text(line + f', "miss_reasons": {value}}}\n')
    requests = tmp_path / "requests.jsonl"
    requests.write_text('{"messages": [{"role": "user", "content": "hi"}]}\n')
    result = cli("report", requests, "--replay", path, "-o", tmp_path / "page.html")
    assert result.exit_code == 2
    assert "miss_reasons" in result.output and "o.jsonl" in result.output


def test_what_the_server_did_not_serve_is_named_by_what_the_replay_knows():
    from pcache.replayer.miss_reasons import MissReasons, explain_served

    replayed = MissReasons()
    replayed.add(64, 100, "never_cached")  # the replay served 64 of 100
    # fewer than the replay: a router sent it elsewhere, a concurrent request raced it, or
    # nothing the replay knows
    routed, why = explain_served(replayed, 64, 32, 100, True, [])
    assert routed.tokens() == {"other_replica": 32, "never_cached": 36}
    assert "routed to a replica" in why
    raced, why = explain_served(replayed, 64, 0, 100, False, [3])
    assert raced.tokens() == {"not_yet_published": 64, "never_cached": 36}
    assert raced.prefilling == [3] and "request 3" in why
    lost, why = explain_served(replayed, 64, 48, 100, False, [])
    assert lost.tokens() == {"unexplained": 16, "never_cached": 36} and "16 tokens fewer" in why
    # as many: the replay's reasons, no difference; more: the replay's reasons of the rest
    same, why = explain_served(replayed, 64, 64, 100, False, [])
    assert same.tokens() == {"never_cached": 36} and why is None
    more, why = explain_served(replayed, 64, 80, 100, False, [])
    assert more.tokens() == {"never_cached": 20} and "16 tokens more" in why
