"""Properties of the block pool: invariants under random use, content safety, and agreement
with an independent dict + OrderedDict implementation of the same rules."""

from __future__ import annotations

import random
from collections import OrderedDict

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    invariant,
    rule,
    run_state_machine_as_test,
)

from pcache.cache.hashing import HashSettings
from pcache.cache.kv_cache_manager import KVCacheManager
from pcache.cache.request import CacheRequest
from pcache.replayer.simulate.policies import RadixPolicy, VllmPolicy
from pcache.traces.record import TraceRecord

BLOCK_SIZE = 4
HASHING = HashSettings(algo="sha256_cbor", block_size=BLOCK_SIZE)
# few distinct prefixes, so requests share blocks often
PROMPTS = st.lists(st.integers(0, 2), min_size=1, max_size=12).map(
    lambda choices: [token for choice in choices for token in ((choice,) * 3 + (choice + 5,))]
)


class PoolMachine(RuleBasedStateMachine):
    """Random admissions, decode steps, frees and resets; integrity checked after each step.

    A shadow copy of what each block holds (written when a request computes it) proves that
    a cache hit never returns a block whose tokens differ from the request's.
    """

    running = Bundle("running")

    def __init__(self):
        super().__init__()
        self.manager = KVCacheManager(num_blocks=14, block_size=BLOCK_SIZE, max_model_len=256)
        self.written: dict[int, tuple[int, ...]] = {}
        self.next_id = 0

    def _write(self, request: CacheRequest, first_block: int) -> None:
        tokens = request.all_token_ids[: request.num_computed_tokens]
        for index, block in enumerate(self.manager.req_to_blocks[request.request_id]):
            if index >= first_block:
                self.written[block.block_id] = tuple(
                    tokens[index * BLOCK_SIZE : (index + 1) * BLOCK_SIZE]
                )

    @rule(target=running, prompt=PROMPTS, plp=st.booleans())
    def admit(self, prompt, plp):
        self.next_id += 1
        request = CacheRequest.from_tokens(
            str(self.next_id), prompt, HASHING, skip_reading_prefix_cache=plp
        )
        hits, num_hits = self.manager.get_computed_blocks(request)
        assert num_hits == len(hits) * BLOCK_SIZE < max(request.num_tokens, 1)
        for index, block in enumerate(hits):
            assert self.written[block.block_id] == request.block_tokens(index, BLOCK_SIZE)
        before = [block.ref_cnt for block in hits]
        new = self.manager.allocate_slots(request, request.num_tokens - num_hits, num_hits, hits)
        if new is None:
            assert [block.ref_cnt for block in hits] == before
            return None
        request.num_computed_tokens = request.num_tokens
        self._write(request, len(hits))
        return request

    @rule(request=running, tokens=st.lists(st.integers(0, 7), min_size=1, max_size=6))
    def decode(self, request, tokens):
        if request is None:
            return
        held = len(self.manager.req_to_blocks[request.request_id])
        request.append_output_token_ids(tokens)
        new = self.manager.allocate_slots(request, len(tokens))
        if new is None:
            return
        request.num_computed_tokens = request.num_tokens
        self._write(request, held - 1)

    @rule(request=consumes(running))
    def finish(self, request):
        if request is not None:
            self.manager.free(request)

    @rule()
    def reset(self):
        busy = any(self.manager.req_to_blocks.values())
        assert self.manager.reset_prefix_cache() is not busy

    @invariant()
    def integrity(self):
        self.manager.check_integrity()

    @invariant()
    def count_step(self):
        PoolMachine.steps += 1


PoolMachine.steps = 0


def test_pool_state_machine_runs_2000_steps():
    PoolMachine.steps = 0
    run_state_machine_as_test(
        PoolMachine,
        settings=settings(
            max_examples=150,
            stateful_step_count=30,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )
    assert PoolMachine.steps >= 2000, PoolMachine.steps


# -- an independent implementation of the same rules -----------------------------------------


class ReferenceLru:
    """The vLLM rules with a dict and an OrderedDict, serial requests only.

    Slots hold hashes; `lru` orders the unreferenced hashed slots from next-evicted to last;
    `by_hash` lists the slots holding a hash, first inserted first. A request hits its
    longest run of leading hashes; misses take a never-used or unhashed slot first, then
    evict the least recently released; on release the request's slots go to the back of the
    LRU last block first.
    """

    def __init__(self, capacity: int):
        self.empty_slots = capacity
        self.lru: OrderedDict[int, object] = OrderedDict()
        self.by_hash: dict[object, list[int]] = {}
        self.next_slot = 0
        self.evicted = 0

    def run(self, hashes: list, num_cached_blocks: int, max_hit_blocks: int) -> int:
        hits = []
        for block_hash in hashes[:max_hit_blocks]:
            slots = self.by_hash.get(block_hash)
            if not slots:
                break
            hits.append(slots[0])
        for slot in hits:
            self.lru.pop(slot, None)
        assert self.empty_slots + len(self.lru) >= len(hashes) - len(hits)
        slots = list(hits)
        for _ in range(len(hits), max(len(hashes), num_cached_blocks)):
            if self.empty_slots:
                self.empty_slots -= 1
            else:
                old_slot, old_hash = self.lru.popitem(last=False)
                self.by_hash[old_hash].remove(old_slot)
                self.evicted += 1
            self.next_slot += 1
            slots.append(self.next_slot)
        for index in range(len(hits), num_cached_blocks):
            self.by_hash.setdefault(hashes[index], []).append(slots[index])
        for index in reversed(range(len(slots))):
            if index < num_cached_blocks:
                self.lru[slots[index]] = hashes[index]
                self.lru.move_to_end(slots[index])  # a slot used twice goes where last freed
            else:
                self.empty_slots += 1
        return len(hits)


def random_hash_trace(rng: random.Random, num_requests: int) -> list[TraceRecord]:
    """Hash-id requests built from a few shared prefixes, like a Mooncake trace."""
    prefixes = [[rng.randrange(1000) for _ in range(rng.randint(1, 6))] for _ in range(6)]
    records = []
    for index in range(num_requests):
        prefix = rng.choice(prefixes)[: rng.randint(1, 6)]
        ids = prefix + [10_000 + rng.randrange(40) for _ in range(rng.randint(0, 4))]
        length = (len(ids) - 1) * 512 + rng.randint(1, 512)
        records.append(TraceRecord(index, index + 1, float(index), length, hash_ids=ids))
    return records


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), capacity=st.integers(10, 40))
def test_hash_id_pool_matches_reference(seed, capacity):
    records = random_hash_trace(random.Random(seed), 120)
    policy = VllmPolicy(capacity, 512, None)
    reference = ReferenceLru(capacity)
    for record in records:
        admission = policy.admit(record, record.timestamp_ms)
        expected = reference.run(record.hash_ids, len(record.hash_ids), len(record.hash_ids))
        assert admission.hit_blocks == expected
        assert admission.cached_tokens == min(expected * 512, record.input_length)
        policy.release(admission)
    assert policy.evicted_blocks == reference.evicted
    policy.check_integrity()


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), capacity=st.integers(12, 40))
def test_token_pool_matches_reference(seed, capacity):
    rng = random.Random(seed)
    pieces = [[rng.randrange(50) for _ in range(rng.randint(1, 40))] for _ in range(5)]
    policy = VllmPolicy(capacity, 16, HashSettings(algo="pcache", block_size=16))
    reference = ReferenceLru(capacity)
    for index in range(80):
        tokens = [t for _ in range(rng.randint(1, 4)) for t in rng.choice(pieces)][:150]
        record = TraceRecord(index, None, float(index), len(tokens), token_ids=tokens)
        admission = policy.admit(record, float(index))
        hashes = CacheRequest.from_tokens("x", tokens, policy.hash_settings).block_hashes
        num_slots = -(-len(tokens) // 16)
        expected = reference.run(
            hashes + [None] * (num_slots - len(hashes)), len(hashes), (len(tokens) - 1) // 16
        )
        assert admission.cached_tokens == expected * 16
        policy.release(admission)
    assert policy.evicted_blocks == reference.evicted


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), capacity=st.integers(6, 30))
def test_radix_integrity_and_unlimited_agreement(seed, capacity):
    """Radix: invariants hold at any capacity; unlimited, it hits the longest seen prefix."""
    records = random_hash_trace(random.Random(seed), 80)
    bounded = RadixPolicy(capacity, 512, unit_tokens=512)
    unlimited = RadixPolicy(None, 512, unit_tokens=512)
    seen: list[list[int]] = []
    for record in records:
        if len(record.hash_ids) <= capacity:
            bounded.release(bounded.admit(record, record.timestamp_ms))
            bounded.check_integrity()
        admission = unlimited.admit(record, record.timestamp_ms)
        best = 0
        for earlier in seen:
            common = 0
            while (
                common < min(len(earlier), len(record.hash_ids))
                and earlier[common] == record.hash_ids[common]
            ):
                common += 1
            best = max(best, common)
        assert admission.cached_tokens == min(best * 512, record.input_length)
        unlimited.release(admission)
        seen.append(record.hash_ids)


@settings(max_examples=30, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    capacity=st.integers(10, 30),
    policy=st.sampled_from(["vllm", "radix"]),
)
def test_timed_replay_keeps_invariants(seed, capacity, policy):
    """Overlapping requests hold blocks; the cache stays consistent after every admission."""
    from pcache.replayer.simulate.driver import SimulationOptions, simulate
    from pcache.traces.record import Trace

    rng = random.Random(seed)
    records = random_hash_trace(rng, 60)
    for record in records:
        record.timestamp_ms = float(rng.randrange(0, 3000))
        record.output_length = rng.randrange(0, 200)
    records.sort(key=lambda record: record.timestamp_ms)
    trace = Trace("random", "mooncake", 512, records)
    options = SimulationOptions(policy=policy, cache_blocks=capacity, concurrency="timed")
    report = simulate(trace, options, keep_requests=True, check_every=1)
    assert report.requests == 60 and report.hit_tokens <= report.query_tokens
    assert report.peak_used_blocks <= capacity
    starts = [row.start_ms for row in report.per_request]
    assert all(row.start_ms >= row.timestamp_ms for row in report.per_request)
    assert all(row.ttft_ms >= row.start_ms - row.timestamp_ms for row in report.per_request)
    assert len(starts) == 60
