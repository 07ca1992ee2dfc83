"""Properties: `PrefixIndex` (lint's view of the cache) equals the replay's pool and radix tree.

Unlimited capacity, serial replay: the hits `replay --simulate` computes for each request,
request by request, are the reusable tokens `PrefixIndex` and `reusable` give.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from pcache.cache.profiles import load_profile
from pcache.cache.reuse import PrefixIndex, reusable
from pcache.replayer.simulate.driver import SimulationOptions, simulate
from pcache.traces.record import Trace, TraceRecord

PROMPTS = st.lists(
    st.tuples(
        st.lists(st.integers(0, 3), max_size=48),
        st.sampled_from([None, None, None, "tenant-a"]),
    ),
    min_size=1,
    max_size=10,
)


def _replayed_hits(prompts, policy: str, block_size: int) -> list[int]:
    records = [
        TraceRecord(i, i + 1, float(i), len(tokens), token_ids=list(tokens), cache_salt=salt)
        for i, (tokens, salt) in enumerate(prompts)
    ]
    trace = Trace("generated", "pcache", None, records)
    options = SimulationOptions(policy=policy, block_size=block_size)
    report = simulate(trace, options, keep_requests=True)
    return [outcome.cached_tokens for outcome in report.per_request]


def _index_hits(prompts, profile_name: str, block_size: int) -> list[int]:
    profile = load_profile(profile_name)
    index = PrefixIndex(block_size)
    hits = []
    for tokens, salt in prompts:
        hits.append(reusable(profile, index.observe(tokens, salt), len(tokens), block_size))
    index.check_integrity()
    return hits


@settings(max_examples=300, deadline=None)
@given(prompts=PROMPTS, block_size=st.integers(1, 6))
def test_the_index_gives_the_pools_hits(prompts, block_size):
    assert _index_hits(prompts, "vllm", block_size) == _replayed_hits(prompts, "vllm", block_size)


@settings(max_examples=300, deadline=None)
@given(prompts=PROMPTS)
def test_the_index_gives_the_radix_trees_hits(prompts):
    assert _index_hits(prompts, "sglang", 4) == _replayed_hits(prompts, "radix", 4)


@settings(max_examples=300, deadline=None)
@given(
    prompts=st.lists(st.lists(st.integers(0, 3), max_size=40), min_size=1, max_size=8),
    block_size=st.integers(1, 5),
)
def test_the_index_finds_the_longest_common_prefix_exactly(prompts, block_size):
    index = PrefixIndex(block_size)
    for number, prompt in enumerate(prompts):
        best = 0
        for earlier in prompts[:number]:
            shared = 0
            while shared < min(len(prompt), len(earlier)) and prompt[shared] == earlier[shared]:
                shared += 1
            best = max(best, shared)
        assert index.match(prompt).length == best
        assert index.observe(prompt) == best
    index.check_integrity()
