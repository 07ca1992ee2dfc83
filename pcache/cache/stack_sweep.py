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

The pass (`stack_pass`) depends on no capacity: it records, for each request, the runs of
blocks released together (their positions and stack distances) and the first block never
released; `sweep_pool` then derives every capacity's outcome from those runs with a few array
operations over all requests, and `unlimited_pool` the outcome of a pool that never evicts.

Keys are dense, integers in `[0, num_ids)`. Request shapes (`hash_ids`):
- token requests (False): `keys` are the full blocks' identities, chained (a block's
  identity names its prefix's, as `pcache.replayer.simulate.sweep.block_keys` makes them: after a
  block never released come only blocks never released), `num_tokens` the prompt length;
  the lookup stops at `(num_tokens - 1) // block_size` blocks (the last token is
  recomputed) and a partial last block is allocated but never cached;
- hash-id requests (True): `keys` are all the request's blocks (the last may be partial, it
  is cached all the same); cached tokens are `min(hits x block_size, num_tokens)`.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from pcache.text.prefix import common_run_length

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


@dataclass(slots=True)
class StackPass:
    """Per request (arrays over the requests) and per run of blocks released together (arrays
    over the runs, request by request): what every capacity's outcome follows from."""

    block_size: int
    hash_ids: bool
    num_tokens: np.ndarray
    num_keys: np.ndarray
    num_blocks: np.ndarray
    """Blocks the request allocates (0: a request with no block, left out)."""
    num_lookup: np.ndarray
    """Blocks it may hit at most."""
    held: np.ndarray
    """1 when the request before ended with a partial block, freed to the queue's head."""
    reached: np.ndarray
    """The request's first block never released before it (its number of keys if none)."""
    run_request: np.ndarray
    run_position: np.ndarray
    run_length: np.ndarray
    run_distance: np.ndarray
    """The stack distance of a run's first block; its next blocks' follow one by one."""
    run_before: np.ndarray
    """The largest stack distance of the request's runs before this one (-1: none)."""
    first_repeated: int
    """The first request holding a key twice (the number of requests if none)."""


def stack_pass(
    requests: Iterable[tuple[Sequence[int], int]],
    block_size: int,
    hash_ids: bool,
    num_ids: int,
    total_blocks: int,
) -> StackPass:
    """One pass over `requests` ((keys, num_tokens) pairs, keys in `[0, num_ids)`, at most
    `total_blocks` keys in all)."""
    last_time = np.zeros(num_ids + 1, dtype=np.int64)  # 0: never released
    alive = bytearray(total_blocks + 2)  # release times still the last of their block
    chunk_live = [0] * ((total_blocks >> _CHUNK_BITS) + 2)
    columns: tuple[list[int], ...] = ([], [], [], [], [], [])
    num_tokens_of, num_keys_of, blocks_of, lookup_of, held_of, reached_of = columns
    runs: tuple[list[int], ...] = ([], [], [], [], [])
    run_request, run_position, run_length, run_distance, run_before = runs
    first_repeated = None
    clock = 0
    partial_slot = 0  # the previous request's partial block, free at the head
    for number, (keys, num_tokens) in enumerate(requests):
        num_keys = len(keys)
        num_tokens_of.append(num_tokens)
        num_keys_of.append(num_keys)
        held_of.append(partial_slot)
        if hash_ids:
            num_blocks = num_lookup = num_keys
            partial = 0
        else:
            num_blocks = -(-num_tokens // block_size) if num_tokens > 0 else 0
            num_lookup = (num_tokens - 1) // block_size if num_tokens > 0 else 0
            partial = 1 if num_tokens % block_size else 0
            assert num_keys == num_tokens // block_size
        if not num_blocks:  # nothing allocated: the request leaves the pool as it was
            blocks_of.append(0)
            lookup_of.append(0)
            reached_of.append(0)
            continue
        blocks_of.append(num_blocks)
        lookup_of.append(num_lookup)
        if not num_keys:
            reached_of.append(0)
            partial_slot = partial
            continue
        indices = _as_indices(keys)
        times = last_time[indices].tolist()
        try:
            reached = times.index(0)
        except ValueError:
            reached = num_keys
        reached_of.append(reached)
        repeated = hash_ids and len(set(indices.tolist())) < num_keys
        if repeated and first_repeated is None:
            first_repeated = number
        # stack distances before this request: live release times after the block's own;
        # a run of blocks released together (times t, t - 1, ...) is one count
        end = num_keys if hash_ids else reached  # chained keys: nothing released after
        before = -1
        released_runs = []
        position = 0
        while position < end:
            released = times[position]
            if not released:
                position += 1
                continue
            chunk = released >> _CHUNK_BITS  # live times after it: in its chunk, then later
            distance = alive.count(1, released + 1, (chunk + 1) << _CHUNK_BITS)
            distance += sum(chunk_live[chunk + 1 : (clock >> _CHUNK_BITS) + 1])
            following = list(range(released, released - (end - position), -1))
            if times[position:end] == following:
                length = end - position
            else:
                length = common_run_length(times, position, following, 0)
            run_request.append(number)
            run_position.append(position)
            run_length.append(length)
            run_distance.append(distance)
            run_before.append(before)
            before = max(before, distance + length - 1)
            released_runs.append((released, length))
            position += length
        # release: last block first, so the first block is the most recent
        if repeated:
            for position in range(num_keys - 1, -1, -1):
                key = int(indices[position])
                clock += 1
                released = int(last_time[key])
                if released:
                    alive[released] = 0
                    chunk_live[released >> _CHUNK_BITS] -= 1
                alive[clock] = 1
                chunk_live[clock >> _CHUNK_BITS] += 1
                last_time[key] = clock
        else:
            for latest, length in released_runs:
                alive[latest - length + 1 : latest + 1] = bytes(length)
                _count(chunk_live, latest - length + 1, latest, -1)
            first = clock + 1
            clock += num_keys
            alive[first : clock + 1] = b"\x01" * num_keys
            _count(chunk_live, first, clock, 1)
            last_time[indices] = np.arange(clock, first - 1, -1)
        partial_slot = partial
    count = len(num_tokens_of)
    column = [np.array(values, dtype=np.int64) for values in (*columns, *runs)]
    return StackPass(
        block_size,
        hash_ids,
        *column,
        first_repeated=count if first_repeated is None else first_repeated,
    )


def _as_indices(keys: Sequence[int]) -> np.ndarray:
    if isinstance(keys, np.ndarray):
        return keys
    if isinstance(keys, array) and keys.typecode == "q":
        return np.frombuffer(keys, dtype=np.int64)
    return np.array(keys, dtype=np.int64)


def _count(chunk_live: list[int], low: int, high: int, sign: int) -> None:
    """Add (`sign` 1) or take (-1) the release times `low..high` to their chunks' counts."""
    if low >> _CHUNK_BITS == high >> _CHUNK_BITS:
        chunk_live[low >> _CHUNK_BITS] += sign * (high - low + 1)
        return
    for chunk in range(low >> _CHUNK_BITS, (high >> _CHUNK_BITS) + 1):
        start = max(low, chunk << _CHUNK_BITS)
        end = min(high, ((chunk + 1) << _CHUNK_BITS) - 1)
        chunk_live[chunk] += sign * (end - start + 1)


def sweep_pool(stack: StackPass, capacities: Sequence[int]) -> list[CapacityOutcome]:
    """Every capacity's outcome, each capacity at least the largest request's blocks."""
    return [_outcome(stack, capacity) for capacity in capacities]


def _outcome(stack: StackPass, capacity: int) -> CapacityOutcome:
    room = capacity - stack.held
    # hits: the blocks before the first whose distance (or one before it) reaches the room
    hits = np.minimum(stack.reached, stack.num_lookup)
    runs = stack.run_request
    if len(runs):
        run_room = room[runs]
        count = np.clip(run_room - stack.run_distance, 0, stack.run_length)
        count[stack.run_before >= run_room] = 0
        ended = np.where(count < stack.run_length, stack.run_position + count, _FAR)
        hits = np.minimum(hits, _least_per_request(stack, ended))
        # a block cached anew that is cached already (a distance below the room past the hits)
        since = hits[runs]
        nearest = stack.run_distance + np.maximum(since - stack.run_position, 0)
        nearest[stack.run_position + stack.run_length <= since] = _FAR
        again = (hits < stack.num_keys) & (_least_per_request(stack, nearest) < room)
    else:
        again = np.zeros(len(hits), dtype=bool)
    tainted = np.flatnonzero(again)
    first_tainted = min(int(tainted[0]) if len(tainted) else len(hits), stack.first_repeated)
    taken = np.maximum(stack.num_blocks - hits - stack.held, 0)
    used = np.minimum(np.cumsum(taken), capacity)
    evicted = taken - np.diff(used, prepend=0)
    cached = hits * stack.block_size
    if stack.hash_ids:
        cached = np.minimum(cached, stack.num_tokens)
    return CapacityOutcome(
        capacity,
        cached.tolist(),
        hit_requests=int(np.count_nonzero(hits)),
        evicted_blocks=int(evicted.sum()),
        peak_used_blocks=int(used[-1]) if len(used) else 0,
        exact=not evicted[first_tainted:].any(),
    )


def _least_per_request(stack: StackPass, values: np.ndarray) -> np.ndarray:
    """The least of `values` (one per run) over each request's runs (`_FAR`: no run)."""
    runs = stack.run_request
    starts = np.flatnonzero(np.diff(runs, prepend=-1))
    least = np.full(len(stack.num_tokens), _FAR, dtype=np.int64)
    least[runs[starts]] = np.minimum.reduceat(values, starts)
    return least


def unlimited_pool(stack: StackPass) -> CapacityOutcome:
    """The outcome of a pool that never evicts: every block ever cached is still there
    (`capacity`: the blocks it ever used)."""
    hits = np.minimum(stack.reached, stack.num_lookup)
    used = int(np.maximum(stack.num_blocks - hits - stack.held, 0).sum())
    cached = hits * stack.block_size
    if stack.hash_ids:
        cached = np.minimum(cached, stack.num_tokens)
    return CapacityOutcome(used, cached.tolist(), int(np.count_nonzero(hits)), 0, used, exact=True)
