"""The serial fast path (`BlockPool.replay_request`, `VllmPolicy.serve`) equals the general
path (`admit`: touch + get_new_blocks + cache_full_blocks, then `release`: free_blocks) on
random traces and on the sample traces: same hits, evictions, peak, free queue and hash map."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pcache.replayer.simulate.driver import SimulationOptions, _unlimited_capacity, simulate
from pcache.replayer.simulate.policies import VllmPolicy
from pcache.traces.readers import read_trace
from pcache.traces.record import TraceRecord
from tests.conftest import SAMPLES

MOONCAKE = Path("/work/shared/traces/mooncake/conversation_trace.jsonl")
_beside = SAMPLES.parent.parent / "shared" / "traces" / "mooncake" / MOONCAKE.name
if _beside.is_file():
    MOONCAKE = _beside


def pool_state(policy: VllmPolicy) -> tuple:
    """Everything observable about the pool: queue order, hash map, counters, references."""
    pool = policy.pool
    queue = [block.block_id for block in pool.free_block_queue.get_all_free_blocks()]
    hashes = {
        key: [block.block_id for block in holders]
        for key, holders in pool.cached_block_hash_to_block.items()
    }
    references = [block.ref_cnt for block in pool.blocks]
    return queue, hashes, references, pool.num_evicted_blocks, pool.max_block_id_used


def replay_both(records: list[TraceRecord], capacity: int, block_size: int) -> None:
    fast = VllmPolicy(capacity, block_size, None)
    general = VllmPolicy(capacity, block_size, None)
    for record in records:
        served = fast.serve(record, record.timestamp_ms)
        admission = general.admit(record, record.timestamp_ms)
        assert admission is not None and served is not None
        general.release(admission)
        assert served == (admission.cached_tokens, admission.hit_blocks), record
    assert pool_state(fast) == pool_state(general)
    fast.check_integrity()


def random_records(rng: random.Random, num_requests: int, vocabulary: int) -> list:
    """Shared prefixes, repeated ids inside a request, and ids shared between requests."""
    prefixes = [[rng.randrange(vocabulary) for _ in range(rng.randint(1, 6))] for _ in range(5)]
    records = []
    for index in range(num_requests):
        ids = rng.choice(prefixes)[: rng.randint(0, 6)]
        ids += [rng.randrange(vocabulary) for _ in range(rng.randint(0, 5))]
        if ids and rng.random() < 0.2:
            ids.insert(rng.randrange(len(ids) + 1), rng.choice(ids))  # a repeated id
        length = max(len(ids) - 1, 0) * 16 + rng.randint(1, 16)
        records.append(TraceRecord(index, index + 1, float(index), length, hash_ids=ids))
    return records


@settings(max_examples=150, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    capacity=st.integers(12, 60),
    vocabulary=st.sampled_from([8, 30, 400]),
)
def test_fast_path_equals_general_path_on_random_traces(seed, capacity, vocabulary):
    replay_both(random_records(random.Random(seed), 150, vocabulary), capacity, 16)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), capacity=st.integers(12, 40))
def test_fast_path_falls_back_while_blocks_are_held(seed, capacity):
    """With blocks referenced (a request still running) the pool takes the general steps."""
    rng = random.Random(seed)
    records = random_records(rng, 80, 30)
    fast = VllmPolicy(capacity, 16, None)
    general = VllmPolicy(capacity, 16, None)
    held_fast = fast.admit(records[0], 0.0)
    held_general = general.admit(records[0], 0.0)
    for record in records[1:]:
        served = fast.serve(record, record.timestamp_ms)
        admission = general.admit(record, record.timestamp_ms)
        assert (served is None) == (admission is None)
        if admission is not None:
            general.release(admission)
            assert served == (admission.cached_tokens, admission.hit_blocks)
    fast.release(held_fast)
    general.release(held_general)
    assert pool_state(fast) == pool_state(general)
    fast.check_integrity()


@pytest.mark.parametrize("name", ["mooncake_tiny.jsonl", "bailian_tiny.jsonl"])
@pytest.mark.parametrize("capacity", [None, 4, 9])
def test_fast_path_equals_general_path_on_samples(name, capacity):
    trace = read_trace(SAMPLES / "traces" / name)
    needed = max(len(record.hash_ids) for record in trace.records)
    if capacity is not None and capacity < needed:
        capacity = needed
    if capacity is None:
        capacity = _unlimited_capacity(trace, trace.block_size)
    replay_both(trace.records, capacity, trace.block_size)


@pytest.mark.parametrize("capacity", [None, 20_000, 1_000])
def test_fast_path_equals_general_path_on_mooncake(capacity):
    if not MOONCAKE.is_file():
        pytest.skip(f"{MOONCAKE} is absent")
    trace = read_trace(MOONCAKE)
    if capacity is None:
        capacity = _unlimited_capacity(trace, trace.block_size)
    replay_both(trace.records, capacity, trace.block_size)


def test_serial_and_timed_agree_when_requests_never_overlap():
    """`simulate` serial (fast path) and timed (general path) on requests that never overlap."""
    records = random_records(random.Random(7), 200, 30)
    for index, record in enumerate(records):
        record.timestamp_ms = index * 1e9  # each finishes long before the next arrives
    from pcache.traces.record import Trace

    trace = Trace("random", "mooncake", 16, records)
    for capacity in (None, 14, 30):
        serial = simulate(trace, SimulationOptions(cache_blocks=capacity))
        timed = simulate(trace, SimulationOptions(cache_blocks=capacity, concurrency="timed"))
        for key in ("hit_tokens", "hit_requests", "evicted_blocks", "peak_used_blocks"):
            assert getattr(serial, key) == getattr(timed, key), key


@pytest.mark.parametrize("policy", ["vllm", "radix", "anthropic"])
@pytest.mark.parametrize(
    "name", ["mooncake_tiny.jsonl", "bailian_tiny.jsonl", "requests_tiny.jsonl", "random"]
)
def test_batched_serial_loop_equals_per_request_loop(name, policy):
    """Without per-request rows, serial replays are served in batches and their TTFTs computed
    afterwards; the report is the same as the per-request loop's (`keep_requests`)."""
    from pcache.traces.record import Trace

    if name == "random":
        trace = Trace("random", "mooncake", 16, random_records(random.Random(3), 2500, 40))
    else:
        trace = read_trace(SAMPLES / "traces" / name)
    block_size = trace.block_size or 16
    largest = max(-(-record.input_length // block_size) for record in trace.records)
    capacities = [None] if policy == "anthropic" else [None, largest, largest + 7]
    for capacity in capacities:
        options = SimulationOptions(policy=policy, cache_blocks=capacity)
        batched = simulate(trace, options)
        per_request = simulate(trace, options, keep_requests=True)
        assert batched.to_dict() == per_request.to_dict()
        assert len(per_request.per_request) == len(trace.records)


@settings(max_examples=200, deadline=None)
@given(values=st.lists(st.sampled_from([0.5, 1.25, 3.0, 55.0, 55.125, 1e3, 7.75]), max_size=60))
def test_distribution_from_counts_matches_sorted_percentiles(values):
    from collections import Counter

    from pcache.replayer.report import distribution
    from pcache.replayer.ttft import percentile

    summary = distribution(Counter(values))
    ordered = sorted(values)
    for name, fraction in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99)):
        assert summary[name] == round(percentile(ordered, fraction), 3)
    mean = sum(ordered) / len(ordered) if ordered else 0.0
    assert summary["mean"] == pytest.approx(round(mean, 3), abs=1e-3)
