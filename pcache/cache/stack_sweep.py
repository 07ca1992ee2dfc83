"""The serial vLLM pool at many capacities in one pass: LRU stack distances.

In a serial replay (each request admitted, then all its blocks freed) the pool of `C` blocks
holds, between requests, the `C - u` most recently released distinct blocks, where `u` is 1
when the last request ended with a partial block (freed unhashed to the head of the free
queue, it takes a slot and holds nothing) and 0 otherwise. Released blocks go to the tail
last block first, so a request's first block is the most recent; evictions pop the head.
So a block is cached at capacity `C` exactly when its stack distance (the number of distinct
blocks released since it was) is below `C - u`, and one pass over the requests gives every
capacity's hits; the blocks each capacity takes from never-used slots and evicts follow
from its hit counts.

The equivalence needs every block a request caches anew to be absent from the pool: a block
cached twice (vLLM does not de-duplicate, e.g. a fully cached prompt whose last block is
recomputed) gives the pool two slots for one hash, and from the next eviction on the order
may differ from a single LRU stack. A capacity where that happened and something was evicted
afterwards is marked inexact (`CapacityOutcome.exact`); the caller replays it in the pool.
Before any eviction, every block ever released is still cached, duplicates or not.

Request shapes (`hash_ids`):
- token requests (False): `keys` are the full blocks' identities, chained (a block's
  identity names its prefix's, as `pcache.replayer.sweep.block_keys` makes them: after a
  block never released come only blocks never released), `num_tokens` the prompt length;
  the lookup stops at `(num_tokens - 1) // block_size` blocks (the last token is
  recomputed) and a partial last block is allocated but never cached;
- hash-id requests (True): `keys` are all the request's blocks (the last may be partial, it
  is cached all the same); cached tokens are `min(hits x block_size, num_tokens)`.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import accumulate

from pcache.prefix import common_run_length

_CHUNK_BITS = 10  # release times are counted in chunks of 1,024
_FAR = 1 << 62  # the stack distance of a block never released


@dataclass(slots=True)
class CapacityOutcome:
    """What the pool of `capacity` blocks did over the requests."""

    capacity: int
    cached_tokens: list[int] = field(default_factory=list)
    hit_requests: int = 0
    evicted_blocks: int = 0
    peak_used_blocks: int = 0
    exact: bool = True


def sweep_pool(
    requests: Iterable[tuple[Sequence, int]],
    block_size: int,
    capacities: Sequence[int],
    hash_ids: bool,
    total_blocks: int,
) -> list[CapacityOutcome]:
    """Every capacity's outcome over `requests` ((keys, num_tokens) pairs, at most
    `total_blocks` keys in all), each capacity at least the largest request's blocks."""
    outcomes = [CapacityOutcome(capacity) for capacity in capacities]
    count = len(capacities)
    used = [0] * count
    tainted = [False] * count
    alive = bytearray(total_blocks + 2)  # release times still the last of their block
    chunk_live = [0] * ((total_blocks >> _CHUNK_BITS) + 2)
    last_time: dict = {}
    get = last_time.get
    clock = 0
    partial_slot = 0  # the previous request's partial block, free at the head
    for keys, num_tokens in requests:
        num_keys = len(keys)
        if hash_ids:
            if not num_keys:
                for outcome in outcomes:
                    outcome.cached_tokens.append(0)
                continue
            num_blocks = num_lookup = num_keys
            partial = 0
        else:
            if num_tokens == 0:
                for outcome in outcomes:
                    outcome.cached_tokens.append(0)
                continue
            num_blocks = -(-num_tokens // block_size)
            num_lookup = (num_tokens - 1) // block_size
            partial = 1 if num_tokens % block_size else 0
            assert num_keys == num_tokens // block_size
        repeated = hash_ids and len(set(keys)) < num_keys
        if repeated:  # a block twice in one request: two slots may hold it
            tainted = [True] * count
        # stack distances before this request: live release times after the block's own;
        # a run of blocks released together (times t, t - 1, ...) is one count
        times = list(map(get, keys))
        distances = [_FAR] * num_keys
        runs: list[tuple[int, int]] = []  # (latest release time, blocks) of each run
        position = 0
        while position < num_keys:
            released = times[position]
            if released is None:
                if not hash_ids:  # chained keys: nothing after a new block was released
                    break
                position += 1
                continue
            chunk = released >> _CHUNK_BITS  # live times after it: in its chunk, then later
            distance = alive.count(1, released + 1, (chunk + 1) << _CHUNK_BITS)
            distance += sum(chunk_live[chunk + 1 :])
            following = list(range(released - 1, released - num_keys + position, -1))
            length = 1 + common_run_length(times, position + 1, following, 0)
            distances[position : position + length] = range(distance, distance + length)
            runs.append((released, length))
            position += length
        leading = list(accumulate(distances[:num_lookup], max))
        for index, outcome in enumerate(outcomes):
            room = outcome.capacity - partial_slot
            hits = bisect_left(leading, room)
            cached = hits * block_size
            if hash_ids and cached > num_tokens:
                cached = num_tokens
            outcome.cached_tokens.append(cached)
            if hits:
                outcome.hit_requests += 1
            if hits < num_keys and min(distances[hits:]) < room:
                tainted[index] = True  # a block cached anew is cached already
            taken = num_blocks - hits - partial_slot if num_blocks - hits > partial_slot else 0
            never_used = outcome.capacity - used[index]
            fresh = taken if taken < never_used else never_used
            used[index] += fresh
            if taken > fresh:
                outcome.evicted_blocks += taken - fresh
                if tainted[index]:
                    outcome.exact = False
        # release: last block first, so the first block is the most recent
        if repeated:
            for position in range(num_keys - 1, -1, -1):
                key = keys[position]
                clock += 1
                released = get(key)
                if released is not None:
                    alive[released] = 0
                    chunk_live[released >> _CHUNK_BITS] -= 1
                alive[clock] = 1
                chunk_live[clock >> _CHUNK_BITS] += 1
                last_time[key] = clock
        else:
            for latest, length in runs:
                alive[latest - length + 1 : latest + 1] = bytes(length)
                _count(chunk_live, latest - length + 1, latest, -1)
            first = clock + 1
            clock += num_keys
            alive[first : clock + 1] = b"\x01" * num_keys
            _count(chunk_live, first, clock, 1)
            last_time.update(zip(reversed(keys), range(first, clock + 1), strict=True))
        partial_slot = partial
    for index, outcome in enumerate(outcomes):
        outcome.peak_used_blocks = used[index]
    return outcomes


def _count(chunk_live: list[int], low: int, high: int, sign: int) -> None:
    """Add (`sign` 1) or take (-1) the release times `low..high` to their chunks' counts."""
    for chunk in range(low >> _CHUNK_BITS, (high >> _CHUNK_BITS) + 1):
        start = max(low, chunk << _CHUNK_BITS)
        end = min(high, ((chunk + 1) << _CHUNK_BITS) - 1)
        chunk_live[chunk] += sign * (end - start + 1)


def unlimited_pool(
    requests: Iterable[tuple[Sequence, int]], block_size: int, hash_ids: bool
) -> CapacityOutcome:
    """The outcome of a pool that never evicts: every block ever cached is still there
    (`capacity`: the blocks it ever used)."""
    outcome = CapacityOutcome(0)
    seen: set = set()
    contains = seen.__contains__
    used = partial_slot = 0
    cached_tokens = outcome.cached_tokens
    for keys, num_tokens in requests:
        num_keys = len(keys)
        if hash_ids:
            num_blocks = num_lookup = num_keys
            partial = 0
        else:
            num_blocks = -(-num_tokens // block_size)
            num_lookup = (num_tokens - 1) // block_size if num_tokens else 0
            partial = 1 if num_tokens % block_size else 0
        if not num_blocks:
            cached_tokens.append(0)
            continue
        hits = 0
        for key in keys[:num_lookup]:
            if not contains(key):
                break
            hits += 1
        if num_blocks - hits > partial_slot:
            used += num_blocks - hits - partial_slot
        seen.update(keys)
        cached = hits * block_size
        if hash_ids and cached > num_tokens:
            cached = num_tokens
        cached_tokens.append(cached)
        if hits:
            outcome.hit_requests += 1
        partial_slot = partial
    outcome.capacity = outcome.peak_used_blocks = used
    return outcome
