"""Cache policies the simulator drives: one `admit` / `release` interface over each cache.

- `VllmPolicy`: the `BlockPool` with vLLM 0.33 semantics. Token requests go through
  `KVCacheManager` (hits capped at num_tokens - 1, whole blocks only). Hash-id requests use a
  specialised path over the same pool: every listed id is a block (the last may be partial),
  the hit is the longest run of leading ids found, hit tokens = min(hits x block size,
  input length), as the traces' publishers count it.
- `RadixPolicy`: SGLang-style radix tree, token-granular for token requests (last token
  recomputed), block-granular for hash-id requests; LRU eviction of unreferenced leaves.
- `ProviderPolicy`: a hosted API's rules (min prefix, granularity, TTL refreshed on use) over an
  unbounded radix tree; hits are rounded by `pcache.cache.profiles.reusable_tokens`.

`admit` returns an `Admission` (cached tokens, blocks held), or None when the cache cannot
hold the request now; `release` returns its blocks (their prefixes stay cached). `serve` is
`admit` then `release` in one call (serial replay), and `serve_all` serves a batch of
records that way; for hash-id requests on the vLLM pool that is `BlockPool.replay_request`,
one pass over each request's blocks.

With `defer_caching=True` (timed replays publishing blocks when the prefill ends, see
`pcache.replayer.simulate.driver`), what a request computes becomes a hit for others only when
`publish` is called on its admission (`publish_prefilled`), not when it is admitted.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from pcache.cache.block_pool import BlockPool
from pcache.cache.hashing import HashSettings
from pcache.cache.kv_cache_manager import KVCacheManager, cdiv
from pcache.cache.profiles import ModelMinimums, Profile, reusable_tokens
from pcache.cache.radix import RadixCache, RadixNode
from pcache.cache.request import CacheRequest
from pcache.traces.record import TraceRecord


@dataclass(slots=True)
class Admission:
    """What admitting one request did: tokens served from the cache, and its handle."""

    cached_tokens: int
    hit_blocks: int
    handle: Any = None
    unpublished: Callable[[], None] | None = None
    """Publishes the blocks this request computes, when deferred (None: published)."""


def publish(admission: Admission) -> None:
    """Make the blocks `admission`'s request computed hits for later requests (once)."""
    unpublished = admission.unpublished
    if unpublished is not None:
        admission.unpublished = None
        unpublished()


def publish_prefilled(prefilling: list, now: float) -> None:
    """Publish the requests of `prefilling` (a heap of (prefill end, order, admission)) whose
    prefill has ended by `now`."""
    while prefilling and prefilling[0][0] <= now:
        publish(heapq.heappop(prefilling)[2])


class CapacityTooSmall(Exception):
    """The request cannot fit even in an empty cache (`position`: its index in a batch)."""

    def __init__(self, needed_blocks: int, position: int | None = None):
        self.needed_blocks = needed_blocks
        self.position = position
        super().__init__(needed_blocks)


def serve_each(policy, records: Sequence[TraceRecord], cached: list[int]) -> int:
    """`policy.serve` on each record in turn: cached tokens appended, hit requests returned."""
    hit_requests = 0
    for position, record in enumerate(records):
        served = policy.serve(record, record.timestamp_ms)
        if served is None:
            raise CapacityTooSmall(cdiv(record.input_length, policy.block_size), position)
        cached.append(served[0])
        if served[1]:
            hit_requests += 1
    return hit_requests


def release_finished(policy, running: list, now: float) -> int:
    """Release the requests of `running` (a heap of (finish, order, admission, blocks)) that
    have finished by `now`: the blocks freed."""
    freed = 0
    while running and running[0][0] <= now:
        _, _, held, blocks = heapq.heappop(running)
        policy.release(held)
        freed += blocks
    return freed


class PrefillSlots:
    """At most `count` prefills running at once on one engine (None: no limit): a request's
    prefill starts at its arrival or when the earliest running prefill ends, first come
    first served."""

    def __init__(self, count: int | None):
        assert count is None or count >= 1
        self.count = count
        self.ends: list[float] = []  # heap of the running prefills' end times

    def begin(self, now: float) -> float:
        """When a prefill arriving at `now` starts; `occupy` must follow with its end."""
        ends = self.ends
        if self.count is None:
            return now
        while ends and ends[0] <= now:
            heapq.heappop(ends)
        if len(ends) < self.count:
            return now
        return max(now, heapq.heappop(ends))

    def occupy(self, end: float) -> None:
        if self.count is not None:
            heapq.heappush(self.ends, end)


def admit_waiting(
    policy,
    running: list,
    record: TraceRecord,
    start: float,
    block_size: int,
    prefilling: list | None = None,
) -> tuple[Admission, float, int]:
    """Admit `record` at `start`, finishing the earliest of `running` (a heap of
    (finish, order, admission, blocks)) until it fits: (admission, start, blocks freed).
    Before each try, the prefills of `prefilling` that ended by then are published."""
    freed = 0
    if prefilling:
        publish_prefilled(prefilling, start)
    admission = policy.admit(record, start)
    while admission is None:
        if not running:
            raise CapacityTooSmall(cdiv(record.input_length, block_size))
        finish, _, held, blocks = heapq.heappop(running)
        policy.release(held)
        freed += blocks
        start = max(start, finish)
        if prefilling:
            publish_prefilled(prefilling, start)
        admission = policy.admit(record, start)
    return admission, start, freed


def probe_token_keys(record: TraceRecord, settings: HashSettings, block_size: int) -> list:
    """The block hashes of a token request's prefix that a hit can cover (all but the block
    holding its last token), the keys a vllm pool's index is probed with."""
    request = CacheRequest.from_tokens(
        "probe", record.token_ids, settings, cache_salt=record.cache_salt
    )
    return request.block_hashes[: (request.num_tokens - 1) // block_size]


class VllmPolicy:
    """The vLLM block pool (the same code the engine manages its KV blocks with)."""

    name = "vllm"

    def __init__(
        self,
        num_blocks: int,
        block_size: int,
        hash_settings: HashSettings | None,
        defer_caching: bool = False,
        record_events: bool = False,
    ):
        self.block_size = block_size
        self.defer_caching = defer_caching
        """`admit` leaves the new blocks unpublished (`Admission.unpublished`) until
        `publish`: a timed replay's prefill that has not ended yet caches nothing."""
        self.capacity_blocks = num_blocks
        self.manager = KVCacheManager(
            num_blocks + 1, block_size, max_model_len=2**62, enable_kv_cache_events=record_events
        )
        self.pool: BlockPool = self.manager.block_pool
        self.hash_settings = hash_settings
        self.held: dict[int, list] = {}  # block lists of running hash-id requests
        self._next_id = 0

    @property
    def evicted_blocks(self) -> int:
        return self.pool.num_evicted_blocks

    @property
    def peak_used_blocks(self) -> int:
        return self.pool.max_block_id_used

    def referenced_blocks(self) -> int:
        """Distinct blocks that running requests reference now (physical KV in use)."""
        return self.capacity_blocks - self.pool.free_block_queue.num_free_blocks

    def take_events(self) -> list[tuple]:
        """The pool's KV events since the last call (`record_events`): vLLM's BlockStored,
        BlockRemoved and AllBlocksCleared, keyed by the pool's block keys."""
        return self.pool.take_events()

    def block_keys(self, record: TraceRecord, admission: Admission) -> Sequence:
        """The keys of an admitted request's blocks, prompt first: its block hashes (with
        its generated tokens' blocks), or its hash ids."""
        if record.hash_ids is not None:
            return record.hash_ids
        handle = admission.handle
        return handle.block_hashes if isinstance(handle, CacheRequest) else ()

    def cacheable_blocks(self, record: TraceRecord) -> int:
        """How many of the prompt's blocks a hit can cover: all hash ids; all full blocks
        before the one holding a token prompt's last token (it is always recomputed)."""
        if record.hash_ids is not None:
            return len(record.hash_ids)
        return max(record.input_length - 1, 0) // self.block_size

    def lookup_keys(self, record: TraceRecord) -> Sequence | None:
        """What `peek` looks up for `record` in the pool's index: its hash ids, or the block
        hashes of a token request's prefix that a hit can cover (None: an empty prompt)."""
        if record.hash_ids is not None:
            return record.hash_ids
        if record.input_length == 0:
            return None
        return probe_token_keys(record, self.hash_settings, self.block_size)

    def peek(self, record: TraceRecord, now: float, keys: Sequence | None = None) -> int:
        """The tokens `admit` would find cached, touching nothing in the pool (`keys`: the
        record's `lookup_keys`, when they are hashed once for several pools)."""
        if keys is None:
            keys = self.lookup_keys(record)
            if keys is None:
                return 0
        hits = self.pool.cached_block_hash_to_block.num_leading_hits(keys) * self.block_size
        return hits if record.hash_ids is None else min(hits, record.input_length)

    def admit(self, record: TraceRecord, now: float) -> Admission | None:
        if record.hash_ids is not None:
            return self._admit_hash_ids(record)
        return self._admit_tokens(record)

    def _admit_tokens(self, record: TraceRecord) -> Admission | None:
        assert self.hash_settings is not None and record.token_ids is not None
        self._next_id += 1
        request = CacheRequest.from_tokens(
            str(self._next_id), record.token_ids, self.hash_settings, cache_salt=record.cache_salt
        )
        if record.input_length == 0:
            return Admission(0, 0, None)
        needed = cdiv(request.num_tokens, self.block_size)
        if needed > self.capacity_blocks:
            raise CapacityTooSmall(needed)
        hits, num_hits = self.manager.get_computed_blocks(request)
        defer = self.defer_caching
        blocks = self.manager.allocate_slots(
            request, request.num_tokens - num_hits, num_hits, hits, delay_cache_blocks=defer
        )
        if blocks is None:
            return None
        self.manager.record_prefix_cache_stats(request, num_hits)
        if record.output_token_ids and not self._decode(request, record.output_token_ids):
            self.manager.free(request)
            return None
        admission = Admission(num_hits, len(hits), request)
        if defer:
            prompt = request.num_prompt_tokens
            admission.unpublished = partial(self.manager.cache_blocks, request, prompt)
        return admission

    def _decode(self, request: CacheRequest, output_token_ids: list[int]) -> bool:
        """Write the KV of the generated tokens one at a time, as the engine's decode steps
        do (the last generated token is never fed back); False when the pool runs out."""
        request.num_computed_tokens = request.num_tokens
        defer = self.defer_caching
        for token in output_token_ids[:-1]:
            request.append_output_token_ids(token)
            if self.manager.allocate_slots(request, 1, delay_cache_blocks=defer) is None:
                return False
            request.num_computed_tokens += 1
        return True

    def _admit_hash_ids(self, record: TraceRecord) -> Admission | None:
        hash_ids = record.hash_ids
        if not hash_ids:
            return Admission(0, 0, [])
        if len(hash_ids) > self.capacity_blocks:
            raise CapacityTooSmall(len(hash_ids))
        pool = self.pool
        hits = pool.cached_block_hash_to_block.leading_hits(hash_ids)
        num_hits = len(hits)
        num_needed = len(hash_ids) - num_hits
        if num_needed + num_hits > pool.free_block_queue.num_free_blocks:  # else surely fits
            num_free_hits = sum(1 for block in hits if block.ref_cnt == 0)
            if num_needed + num_free_hits > pool.free_block_queue.num_free_blocks:
                return None
        pool.touch(hits)
        blocks = hits + pool.get_new_blocks(num_needed)
        self.held[id(blocks)] = blocks
        cache = partial(
            pool.cache_full_blocks, blocks, hash_ids, num_hits, len(hash_ids), self.block_size
        )
        cached = min(num_hits * self.block_size, record.input_length)
        if self.defer_caching:
            return Admission(cached, num_hits, blocks, cache)
        cache()
        return Admission(cached, num_hits, blocks)

    def serve(self, record: TraceRecord, now: float) -> tuple[int, int] | None:
        """Admit and release at once (serial replay): (cached tokens, hit blocks), or None."""
        hash_ids = record.hash_ids
        if hash_ids is None:
            admission = self._admit_tokens(record)
            if admission is None:
                return None
            self.release(admission)
            return admission.cached_tokens, admission.hit_blocks
        if len(hash_ids) > self.capacity_blocks:
            raise CapacityTooSmall(len(hash_ids))
        num_hits = self.pool.replay_request(hash_ids, self.block_size)
        if num_hits is None:
            return None
        return min(num_hits * self.block_size, record.input_length), num_hits

    def serve_all(self, records: Sequence[TraceRecord], cached: list[int]) -> int:
        """`serve` each record in turn: cached tokens appended, hit requests returned."""
        if any(record.hash_ids is None for record in records):
            return serve_each(self, records, cached)
        replay_request = self.pool.replay_request
        block_size, capacity = self.block_size, self.capacity_blocks
        append = cached.append
        hit_requests = 0
        for position, record in enumerate(records):
            hash_ids = record.hash_ids
            if len(hash_ids) > capacity:
                raise CapacityTooSmall(len(hash_ids), position)
            num_hits = replay_request(hash_ids, block_size)
            if not num_hits:
                if num_hits is None:
                    raise CapacityTooSmall(cdiv(record.input_length, block_size), position)
                append(0)
                continue
            hit_requests += 1
            hit_tokens = num_hits * block_size
            input_length = record.input_length
            append(hit_tokens if hit_tokens < input_length else input_length)
        return hit_requests

    def release(self, admission: Admission) -> None:
        """Free the request's blocks; deferred ones are published first (a finished request
        has computed them all, its generated tokens' blocks too)."""
        publish(admission)
        handle = admission.handle
        if isinstance(handle, CacheRequest):
            if self.defer_caching:
                self.manager.cache_blocks(handle, handle.num_tokens)
            self.manager.free(handle)
        elif handle:
            del self.held[id(handle)]
            self.pool.free_blocks(reversed(handle))

    def check_integrity(self) -> None:
        """The pool's invariants; every reference is held by a request or a block list."""
        self.pool.check_integrity()
        references: Counter[int] = Counter()
        for blocks in (*self.manager.req_to_blocks.values(), *self.held.values()):
            references.update(block.block_id for block in blocks)
        for block in self.pool.blocks[1:]:
            assert block.ref_cnt == references[block.block_id], f"{block} is held elsewhere"


class RadixPolicy:
    """SGLang-style radix tree; capacity in tokens (hash-id traces: in blocks)."""

    name = "radix"

    def __init__(
        self,
        num_blocks: int | None,
        block_size: int,
        ttl_ms: float | None = None,
        unit_tokens: int = 1,
        defer_caching: bool = False,
    ):
        self.block_size = block_size
        self.unit_tokens = unit_tokens
        self.defer_caching = defer_caching
        """`admit` inserts the prompt not yet visible to lookups, until `publish`."""
        self.capacity_blocks = num_blocks
        capacity = None if num_blocks is None else num_blocks * block_size // unit_tokens
        self.tree = RadixCache(capacity, ttl_ms)

    @property
    def peak_used_blocks(self) -> int:
        return cdiv(self.tree.peak_units * self.unit_tokens, self.block_size)

    @property
    def evicted_blocks(self) -> int:
        return cdiv(self.tree.num_evicted_units * self.unit_tokens, self.block_size)

    def _key(self, record: TraceRecord) -> list:
        if record.hash_ids is not None:
            return record.hash_ids
        if record.cache_salt:
            return [("salt", record.cache_salt), *record.token_ids]
        return record.token_ids

    def match(self, record: TraceRecord, now: float) -> tuple[int, list]:
        key = self._key(record)
        matched, _ = self.tree.match_prefix(self._lookup_key(record, key), now)
        return self._cached_tokens(record, matched), key

    def peek(self, record: TraceRecord, now: float) -> int:
        """The tokens `match` would find cached, touching nothing in the tree."""
        key = self._lookup_key(record, self._key(record))
        return self._cached_tokens(record, self.tree.peek_prefix(key, now))

    @staticmethod
    def _lookup_key(record: TraceRecord, key: list) -> list:
        """Token requests recompute their last token, so it is never looked up."""
        return key if record.hash_ids is not None else key[: max(len(key) - 1, 0)]

    def _cached_tokens(self, record: TraceRecord, matched: int) -> int:
        if record.hash_ids is not None:
            return min(matched * self.unit_tokens, record.input_length)
        return max(matched - (1 if record.cache_salt else 0), 0)

    def admit(self, record: TraceRecord, now: float) -> Admission | None:
        cached, key = self.match(record, now)
        if not key:
            return Admission(0, 0, None)
        capacity = self.tree.capacity
        if capacity is not None and len(key) > capacity:
            raise CapacityTooSmall(cdiv(len(key) * self.unit_tokens, self.block_size))
        defer = self.defer_caching
        try:
            node = self.tree.insert(key, now, visible=not defer)
        except ValueError:
            return None
        self.tree.lock(node)
        admission = Admission(cached, cdiv(cached, self.block_size), node)
        if defer:
            admission.unpublished = partial(self.tree.make_visible, node)
        return admission

    def serve(self, record: TraceRecord, now: float) -> tuple[int, int] | None:
        """Admit and release at once (serial replay): (cached tokens, hit blocks), or None."""
        admission = self.admit(record, now)
        if admission is None:
            return None
        self.release(admission)
        return admission.cached_tokens, admission.hit_blocks

    def serve_all(self, records: Sequence[TraceRecord], cached: list[int]) -> int:
        """`serve` each record in turn: cached tokens appended, hit requests returned."""
        return serve_each(self, records, cached)

    def release(self, admission: Admission) -> None:
        publish(admission)
        if isinstance(admission.handle, RadixNode):
            self.tree.unlock(admission.handle)

    def check_integrity(self) -> None:
        self.tree.check_integrity()


class ProviderPolicy(RadixPolicy):
    """A hosted provider's caching rules; unbounded capacity, entries expire after the TTL."""

    def __init__(self, profile: Profile, block_size: int, unit_tokens: int = 1):
        ttl = None if profile.ttl_seconds is None else profile.ttl_seconds * 1000.0
        super().__init__(None, block_size, ttl, unit_tokens)
        self.profile = profile
        self.name = profile.name
        self.models = ModelMinimums(profile)
        """The minimum prefix of each record's model (request logs name one)."""

    def admit(self, record: TraceRecord, now: float) -> Admission | None:
        admission = super().admit(record, now)
        assert admission is not None
        common = admission.cached_tokens
        profile = self.models.of(record.model)
        breakpoints = (common,) if profile.granularity == "breakpoint" else ()
        admission.cached_tokens = reusable_tokens(
            profile, common, record.input_length, self.block_size, breakpoints
        )
        admission.hit_blocks = cdiv(admission.cached_tokens, self.block_size)
        return admission
