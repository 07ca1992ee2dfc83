"""Timed replays publishing blocks when the prefill ends (`--publish-blocks prefilled`, the
radix policy's default): a prefix still being prefilled is not yet reusable.

The blocks a request computes become hits for other requests when its prefill ends, on its
own replica. The traces here are small enough to work out every hit by hand, with a TTFT model
of 0.1 ms per uncached token and nothing else (prefill = 0.1 x uncached tokens). Both pools
(vllm with `prefilled`, radix by default) must give the same hits.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pcache.cache.hashing import HashSettings
from pcache.replayer.fleet.driver import simulate_fleet
from pcache.replayer.simulate.driver import SimulationOptions, simulate
from pcache.replayer.ttft import TtftModel
from pcache.traces.record import Trace, TraceRecord
from tests.test_fleet import traces

BLOCK = 512
MODEL = TtftModel(0.0, 0.1, 0.0)
TIMED = SimulationOptions(
    concurrency="timed", ttft=MODEL, decode_tokens_per_s=50.0, publish_blocks="prefilled"
)
POOLS = {"vllm": TIMED, "radix": replace(TIMED, policy="radix", publish_blocks=None)}
pools = pytest.mark.parametrize("options", POOLS.values(), ids=POOLS.keys())


def hash_trace(rows: list[tuple[float, list[int]]]) -> Trace:
    """(arrival ms, hash ids) per request, every block full, 10 output tokens each."""
    records = [
        TraceRecord(index, index + 1, stamp, len(ids) * BLOCK, 10, None, ids)
        for index, (stamp, ids) in enumerate(rows)
    ]
    return Trace("<hand-made>", "mooncake", BLOCK, records)


# A at 0 ms: 1,024 tokens, prefill 102.4 ms (ends 102.4), decode 10 tokens x 20 ms.
# B at 50: arrives while A prefills: no hit; 1,536 tokens, prefill 153.6 (ends 203.6).
# C at 150: A ended at 102.4: [0, 1] hit, 1,024 tokens (nothing left to compute).
# D at 160: A's [0, 1] are cached, B's block 2 is not yet (203.6): 1,024 tokens hit.
# E at 210: B ended at 203.6: [0, 1, 2] hit, 1,536 tokens; D's block 3 ends at 262.4: not.
ROWS = [(0.0, [0, 1]), (50.0, [0, 1, 2]), (150.0, [0, 1]), (160.0, [0, 1, 2, 3])]
ROWS.append((210.0, [0, 1, 2, 3]))
ONE_POOL_HITS = 0 + 0 + 1024 + 1024 + 1536


@pools
def test_one_pool_hits_only_what_finished_prefilling_before_each_prefill_starts(options):
    report = simulate(hash_trace(ROWS), options, keep_requests=True)
    assert [row.cached_tokens for row in report.per_request] == [0, 0, 1024, 1024, 1536]
    assert report.hit_tokens == ONE_POOL_HITS
    # TTFT = prefill of the uncached tokens (no queueing: the cache is unlimited)
    assert [row.ttft_ms for row in report.per_request] == [102.4, 153.6, 0.0, 102.4, 51.2]
    # serial replays finish each request before the next: every shared block is a hit
    serial = replace(options, concurrency="serial")
    assert simulate(hash_trace(ROWS), serial).hit_tokens == 0 + 1024 + 1024 + 1536 + 2048
    # vLLM's rule (`scheduled`): a prefix is a hit from its request's admission
    scheduled = replace(options, publish_blocks="scheduled")
    assert simulate(hash_trace(ROWS), scheduled).hit_tokens == 0 + 1024 + 1024 + 1536 + 2048


@pools
def test_a_fleet_of_one_is_the_single_pool(options):
    fleet = simulate_fleet(hash_trace(ROWS), options, 1, "round-robin")
    assert fleet.hit_tokens == ONE_POOL_HITS


@pools
def test_each_replica_publishes_only_its_own_finished_prefills(options):
    # round-robin over 2: A, C, E on replica 0; B, D on replica 1.
    # replica 0: A no hit; C at 150 after A's end (102.4): 1,024; E at 210: A's and C's
    #   blocks [0, 1] only (B's block 2 lives on replica 1): 1,024.
    # replica 1: B no hit; D at 160 before B's end (203.6): no hit.
    report = simulate_fleet(hash_trace(ROWS), options, 2, "round-robin")
    replicas = report.fleet.replicas
    assert [(r.requests, r.hit_tokens) for r in replicas] == [(3, 2048), (2, 0)]
    # the router's view is the published blocks too: for D, replica 0 held [0, 1] (1,024
    # tokens) and replica 1 nothing; for E, replica 1 had published B's [0, 1, 2] by 203.6
    # (1,536) against replica 0's 1,024: two requests misrouted, 512 + 1,024 tokens
    assert report.fleet.misrouted_requests == 2
    assert report.fleet.misrouted_tokens == 1024 + 512


@pools
def test_precise_routes_on_published_blocks_only(options):
    # precise sends each request to the replica holding its longest published prefix (ties:
    # fewest in flight, then in turn). A -> 0; B: nothing published anywhere, replica 1 has
    # fewer in flight -> 1; C: replica 0 has [0, 1] -> 0, 1,024; D: replica 0 -> 1,024;
    # E at 210: replica 0 holds [0, 1] (D's block 3 ends at 262.4), replica 1 B's [0, 1, 2]
    # -> 1, 1,536.
    report = simulate_fleet(hash_trace(ROWS), options, 2, "precise")
    assert report.hit_tokens == 1024 + 1024 + 1536
    assert report.fleet.misrouted_requests == 0


@pools
def test_token_requests_wait_for_the_prefill_too(options):
    settings = HashSettings(block_size=16)
    prompt = list(range(48))
    rows = [(0.0, prompt), (1.0, prompt + list(range(100, 116))), (10.0, prompt)]
    records = [
        TraceRecord(index, index + 1, stamp, len(ids), 0, ids, None)
        for index, (stamp, ids) in enumerate(rows)
    ]
    trace = Trace("<hand-made>", "requests", None, records)
    options = replace(options, block_size=settings.block_size, hash_algo=settings.algo)
    # the first prefill (48 tokens) ends at 4.8 ms: the request at 1 ms recomputes it, the
    # one at 10 ms hits it but its last token, always recomputed (vllm: whole blocks, 32)
    report = simulate(trace, options, keep_requests=True)
    last = 32 if options.policy == "vllm" else 47
    assert [row.cached_tokens for row in report.per_request] == [0, 0, last]


def test_publish_blocks_is_checked(cli):
    trace = "samples/traces/mooncake_tiny.jsonl"
    result = cli("replay", trace, "--concurrency", "timed", "--publish-blocks", "never")
    assert result.exit_code == 2 and "--publish-blocks must be" in result.output


@pools
def test_one_prefill_slot_serialises_prefills_so_each_sees_the_last(options):
    # --prefill-slots 1: B (at 50) waits for A's prefill (ends 102.4) and hits it; C (150)
    # waits for B's (ends 153.6); D (160) finds the slot free; E (210) waits for D's (211.2)
    one_slot = replace(options, prefill_slots=1)
    report = simulate(hash_trace(ROWS), one_slot, keep_requests=True)
    assert [row.cached_tokens for row in report.per_request] == [0, 1024, 1024, 1536, 2048]
    expected = [102.4, 52.4 + 51.2, 3.6, 51.2, 1.2]
    assert [row.ttft_ms for row in report.per_request] == pytest.approx(expected, abs=1e-3)
    # two slots: B starts at once and misses; C, D, E as without a limit
    two = simulate(hash_trace(ROWS), replace(options, prefill_slots=2), keep_requests=True)
    assert [row.cached_tokens for row in two.per_request] == [0, 0, 1024, 1024, 1536]
    fleet = simulate_fleet(hash_trace(ROWS), one_slot, 1, "round-robin")
    assert fleet.hit_tokens == report.hit_tokens


def test_prefill_slots_are_checked(cli):
    trace = "samples/traces/mooncake_tiny.jsonl"
    result = cli("replay", trace, "--concurrency", "timed", "--prefill-slots", "0")
    assert result.exit_code == 2 and "--prefill-slots must be" in result.output
    for flag, value in (("--prefill-slots", "2"), ("--publish-blocks", "prefilled")):
        serial = cli("replay", trace, flag, value)
        assert serial.exit_code == 2 and "apply to --concurrency timed" in serial.output


@settings(max_examples=60, deadline=None)
@given(
    trace=traces(), policy=st.sampled_from(["vllm", "radix"]), slots=st.sampled_from([None, 1, 3])
)
def test_publishing_at_the_prefills_end_never_hits_more_than_at_admission(trace, policy, slots):
    """Unlimited cache: nothing evicts and nothing waits, so what is published by each
    prefill's start under `prefilled` is a subset of what `scheduled` has published; with one
    slot, each prefill ends before the next starts and the two agree."""
    options = SimulationOptions(policy=policy, concurrency="timed", prefill_slots=slots)
    early = simulate(trace, replace(options, publish_blocks="scheduled"), keep_requests=True)
    late = simulate(trace, replace(options, publish_blocks="prefilled"), keep_requests=True)
    pairs = zip(late.per_request, early.per_request, strict=True)
    assert all(row.cached_tokens <= other.cached_tokens for row, other in pairs)
    if slots == 1:
        assert late.hit_tokens == early.hit_tokens


def test_the_router_study_workload_has_the_benchmarks_shape_and_ceilings():
    """bench/router_study.py's generated-shared-prefix workload: 64 x 16 prompts of 2,048 +
    128 tokens, 256 output tokens, all at time 0; one instance reuses 15/16 x 2,048/2,176 of
    the prompt tokens, and so does an affinity router over 8 replicas."""
    from bench.router_study import generated_shared_prefix

    trace = generated_shared_prefix()
    records = trace.records
    assert len(records) == 64 * 16 and {r.timestamp_ms for r in records} == {0.0}
    assert {(r.input_length, r.output_length, len(r.hash_ids)) for r in records} == {
        (2176, 256, 136)
    }
    assert len({r.hash_ids[0] for r in records}) == 64
    ceiling = simulate(trace, SimulationOptions()).hit_tokens
    assert ceiling == 64 * 15 * 2048
    assert simulate_fleet(trace, SimulationOptions(), 8, "precise").hit_tokens == ceiling
    # all sent at once, SGLang's rule, every prefill at once: nothing is published in time
    at_once = SimulationOptions(concurrency="timed", publish_blocks="prefilled")
    assert simulate_fleet(trace, at_once, 8, "precise").hit_tokens == 0
