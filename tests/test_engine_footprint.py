"""The engine replay's default capacity: the reuse index's count of distinct full prompt blocks
equals the pool's (distinct chained block hashes, cache salt included), plus output blocks."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from pcache.cache.hashing import HashSettings
from pcache.cache.request import CacheRequest
from pcache.replayer.engine.driver import _footprint_blocks
from pcache.traces.record import TraceRecord


def random_records(rng: random.Random) -> list[TraceRecord]:
    prefixes = [[rng.randrange(5) for _ in range(rng.randint(0, 40))] for _ in range(4)]
    records = []
    for index in range(rng.randint(1, 30)):
        ids = rng.choice(prefixes)[: rng.randint(0, 40)]
        ids += [rng.randrange(5) for _ in range(rng.randint(0, 20))]
        records.append(
            TraceRecord(
                index,
                index + 1,
                float(index),
                len(ids),
                token_ids=ids,
                output_length=rng.randint(0, 9),
                cache_salt=rng.choice([None, None, "a", "b"]),
            )
        )
    return records


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), block_size=st.sampled_from([1, 2, 4, 16]))
def test_footprint_counts_the_pools_distinct_blocks(seed, block_size):
    records = random_records(random.Random(seed))
    hashes = set()
    for record in records:
        request = CacheRequest.from_tokens(
            "r", record.token_ids, HashSettings(block_size=block_size), cache_salt=record.cache_salt
        )
        hashes.update(request.block_hashes)
    outputs = sum(-(-(r.output_length + block_size) // block_size) for r in records)
    assert _footprint_blocks(records, block_size) == len(hashes) + outputs
