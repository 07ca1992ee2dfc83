"""Prefix caching changes nothing but speed, and no request ever reads KV that was not written."""

from __future__ import annotations

import hashlib

import pytest

torch = pytest.importorskip("torch")

from hypothesis import HealthCheck, example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from pcache.engine.attention import TorchBackend  # noqa: E402
from pcache.engine.config import EngineConfig  # noqa: E402
from pcache.engine.engine import Engine  # noqa: E402

NUM_NEW_TOKENS = 6


def random_tokens(count: int, seed: int, vocab: int = 512) -> list[int]:
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab, (count,), generator=generator).tolist()


def make_engine(**overrides) -> Engine:
    options = {"model": "tiny-qwen3", "kv_cache_tokens": 1024, "record_logits": True}
    return Engine(EngineConfig(**{**options, **overrides}))


def cold_run(prompt: list[int]):
    engine = make_engine(enable_prefix_caching=False)
    (sequence,) = engine.generate([prompt], NUM_NEW_TOKENS, ignore_eos=True)
    assert sequence.num_cached_tokens == 0
    return sequence.output_token_ids, torch.stack(sequence.logits)


BASE = random_tokens(70, seed=7)
OTHER = random_tokens(40, seed=8)
CASES = {
    "miss: first token differs": ([(BASE[0] + 1) % 512, *BASE[1:]], None, 0),
    "hit of one block": (BASE[:16] + OTHER[:14], None, 16),
    "hit of many blocks": (BASE[:64] + OTHER[:10], None, 64),
    "full hit, last block recomputed": (BASE[:64], None, 48),
    "same prompt again": (BASE, None, 64),
    "cache_salt must miss": (BASE, "tenant-b", 0),
}


@pytest.mark.parametrize("case", list(CASES))
def test_warm_cache_gives_the_cold_logits_and_tokens(case):
    prompt, salt, expected_cached = CASES[case]
    engine = make_engine()
    engine.generate([BASE], NUM_NEW_TOKENS, ignore_eos=True)  # warm the cache
    (sequence,) = engine.generate([prompt], NUM_NEW_TOKENS, [salt], ignore_eos=True)
    assert sequence.num_cached_tokens == expected_cached
    tokens, logits = cold_run(prompt)
    assert sequence.output_token_ids == tokens
    torch.testing.assert_close(torch.stack(sequence.logits), logits, rtol=0, atol=1e-5)
    engine.check_integrity()


def test_no_prefix_cache_never_hits():
    engine = make_engine(enable_prefix_caching=False)
    first, second = engine.generate([BASE, BASE], NUM_NEW_TOKENS, ignore_eos=True)
    (third,) = engine.generate([BASE], NUM_NEW_TOKENS, ignore_eos=True)
    assert (first.num_cached_tokens, second.num_cached_tokens, third.num_cached_tokens) == (0,) * 3
    assert first.output_token_ids == second.output_token_ids == third.output_token_ids


class FingerprintBackend(TorchBackend):
    """The torch backend plus a ledger: which token prefix each written KV slot belongs to.

    A slot holding position p of a sequence is correct only if it was computed for exactly
    the same tokens 0..p. Every store records that prefix's digest; every attention checks
    every slot it reads against the reader's own prefix, layer by layer.
    """

    def __init__(self) -> None:
        self.ledger: dict[tuple[int, int], bytes] = {}
        self.batch = []
        self.num_checked = 0

    @staticmethod
    def digest(tokens: list[int]) -> bytes:
        return hashlib.sha256(str(tokens).encode()).digest()

    def slots(self, item, start: int, end: int, block_size: int):
        for position in range(start, end):
            block = item.block_ids[position // block_size]
            yield position, block * block_size + position % block_size

    def store(self, key, value, k_cache, v_cache, metadata) -> None:
        super().store(key, value, k_cache, v_cache, metadata)
        block_size = k_cache.shape[1]
        for item in self.batch:
            start = item.sequence.num_computed_tokens
            for position, slot in self.slots(item, start, start + item.num_new_tokens, block_size):
                tokens = item.sequence.token_ids[: position + 1]
                self.ledger[(k_cache.data_ptr(), slot)] = self.digest(tokens)

    def attend(self, query, k_cache, v_cache, metadata, scale):
        block_size = k_cache.shape[1]
        for item in self.batch:
            end = item.sequence.num_computed_tokens + item.num_new_tokens
            for position, slot in self.slots(item, 0, end, block_size):
                expected = self.digest(item.sequence.token_ids[: position + 1])
                written = self.ledger.get((k_cache.data_ptr(), slot))
                assert written == expected, (
                    f"{item.sequence.request_id} read slot {slot} (position {position})"
                    + (" before it was written" if written is None else " holding other KV")
                )
                self.num_checked += 1
        return super().attend(query, k_cache, v_cache, metadata, scale)


def instrument(engine: Engine) -> FingerprintBackend:
    backend = FingerprintBackend()
    runner = engine.runner
    prepare = runner.prepare

    def prepare_and_remember(batch):
        backend.batch = batch
        return prepare(batch)

    runner.prepare = prepare_and_remember
    runner.backend = backend
    for k_cache, v_cache in runner.kv_cache:  # unwritten KV is NaN: any read of it shows
        k_cache.fill_(float("nan"))
        v_cache.fill_(float("nan"))
    return backend


def run_checked(engine: Engine, prompts, salts=None) -> list:
    ids = [
        engine.add_request(prompt, NUM_NEW_TOKENS, salt, ignore_eos=True)
        for prompt, salt in zip(prompts, salts or [None] * len(prompts), strict=True)
    ]
    while engine.has_unfinished_requests():
        engine.step()
        engine.check_integrity()
    return [engine.sequences[request_id] for request_id in ids]


def test_same_step_hits_read_only_kv_written_in_that_step():
    """Blocks are published at scheduling time; a request admitted in the same step may hit
    them. Each layer stores the whole batch's K/V before attending, so the reader still sees
    exactly the KV of its own prefix (the ledger), never unwritten memory (NaN)."""
    engine = make_engine()
    backend = instrument(engine)
    first, second = run_checked(engine, [BASE, BASE])
    assert first.num_cached_tokens == 0
    assert second.num_cached_tokens == 64  # hit on blocks published one admission earlier
    assert first.first_scheduled_time == second.first_scheduled_time  # the same step
    tokens, logits = cold_run(BASE)
    for sequence in (first, second):
        assert sequence.output_token_ids == tokens
        torch.testing.assert_close(torch.stack(sequence.logits), logits, rtol=0, atol=1e-5)
    assert backend.num_checked > 0


def test_chunked_prefill_hits_on_blocks_written_in_the_same_step():
    """Step 1 prefills 40 of the first prompt's 70 tokens (blocks 0-1 published, 2 partial).
    Step 2 schedules its last 30 tokens (blocks 2-3 published) and then admits the second
    prompt with a hit on all four blocks: two of them are written by that very step."""
    engine = make_engine(max_num_batched_tokens=40)
    backend = instrument(engine)
    first, second = run_checked(engine, [BASE, BASE])
    assert first.num_cached_tokens == 0
    assert second.num_cached_tokens == 64
    assert second.first_scheduled_time > first.first_scheduled_time
    assert first.output_token_ids == second.output_token_ids == cold_run(BASE)[0]
    assert backend.num_checked > 0


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    lengths=st.lists(st.integers(1, 60), min_size=1, max_size=6),
    shared=st.lists(st.integers(0, 60), min_size=6, max_size=6),
    block_size=st.sampled_from([1, 4, 16, 32]),
    budget=st.integers(8, 128),
    num_blocks=st.integers(12, 40),
)
# a prefill chunk whose size equals the tokens computed before it once looked like sampling
@example(lengths=[1, 14], shared=[0] * 6, block_size=1, budget=8, num_blocks=12)
def test_any_workload_caching_changes_only_speed(lengths, shared, block_size, budget, num_blocks):
    """Random prompts sharing random prefixes, chunked prefill, preemption under a small pool:
    same tokens with and without prefix caching, and never a read of foreign or unwritten KV."""
    prompts = [
        BASE[: min(s, n)] + random_tokens(n, seed=n + 100 * i)[min(s, n) :]
        for i, (n, s) in enumerate(zip(lengths, shared, strict=False))
    ]
    needed = max(len(p) for p in prompts) + NUM_NEW_TOKENS
    num_blocks = max(num_blocks * 16 // block_size, -(-needed // block_size) + 1)
    results = []
    for caching in (True, False):
        engine = make_engine(
            block_size=block_size,
            max_num_batched_tokens=budget,
            num_kv_blocks=num_blocks,
            enable_prefix_caching=caching,
            record_logits=False,
        )
        instrument(engine)
        results.append([s.output_token_ids for s in run_checked(engine, prompts)])
    assert results[0] == results[1]
