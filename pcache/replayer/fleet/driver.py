"""Replay a trace over a fleet: one pool per replica and a router in front of them.

One pass in arrival order. For each request: every replica's pool is asked, without
touching it, how many of the request's tokens it holds (`cached_tokens`, as the engine counts
a hit); the router sees the request as it would in production (`RoutedRequest`: the text
view, the session, and that exact index) and the loads it tracks; the chosen replica's pool
serves it with the simulator's own policies (`pcache.replayer.simulate.policies`: `VllmPolicy`,
`RadixPolicy`, each replica `--cache-blocks` big).

Concurrency as the simulator's (`pcache.replayer.simulate.driver`): `serial` serves each request
and frees its blocks before the next arrives, so no request is in flight when a router looks
(load-aware branches see all loads at 0); `timed` keeps a request's blocks until it finishes
(predicted prefill + output_length / decode rate, on its replica), so routers see requests in
flight. A request's blocks become hits on its replica when the simulator's timed mode says
(`pcache.replayer.simulate.driver`, `publish_blocks`): at admission (`scheduled`, vLLM's rule, the
vllm policy's default) or when its prefill ends (`prefilled`, SGLang's, the radix policy's):
then a request arriving while a request with the same prefix is still prefilling on that
replica hits only what was published before its own prefill starts, and the pools the router
probes hold only published blocks. `prefill_slots` bounds the prefills running at once on
each replica, as in the simulator.

Each replica's pool sees exactly the requests routed to it, in order, so its statistics are
those of a single-pool replay of that sub-trace.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from pcache.cache.hashing import HashSettings
from pcache.cache.kv_cache_manager import cdiv
from pcache.defaults import DEFAULT_CHARS_PER_TOKEN
from pcache.errors import UsageError
from pcache.replayer.fleet.options import FLEET_POLICIES, FleetOptions
from pcache.replayer.fleet.report import FleetSummary, ReplicaStats
from pcache.replayer.fleet.routers import build_parameters, make_router
from pcache.replayer.fleet.routers.request import FleetState, RoutedRequest, text_view
from pcache.replayer.report import ReplayReport, distribution
from pcache.replayer.simulate.driver import SimulationOptions, every_block, observed_cached_total
from pcache.replayer.simulate.policies import (
    CapacityTooSmall,
    PrefillSlots,
    RadixPolicy,
    VllmPolicy,
    admit_waiting,
    publish_prefilled,
    release_finished,
)
from pcache.traces.record import Trace, TraceRecord

Progress = Callable[[int], None] | None


def run_fleet(
    trace: Trace,
    options: SimulationOptions,
    fleet: FleetOptions,
    progress: Progress = None,
    simulate: Callable[..., ReplayReport] | None = None,
) -> list[ReplayReport]:
    """One report per (router, replica count) of `fleet`, routers outermost, each replayed by
    `simulate` (default `simulate_fleet`; `pcache.replayer.fleet.split` runs each replica's
    pool as a task of its own, with the same arguments and the same report)."""
    if options.policy not in FLEET_POLICIES:
        raise UsageError(
            f"--replicas applies to --policy vllm and radix (a pool per replica), not"
            f" {options.policy}"
        )
    simulate = simulate or simulate_fleet
    return [
        simulate(
            trace,
            options,
            count,
            router,
            fleet.parameters.get(router, {}),
            fleet.chars_per_token,
            progress,
        )
        for router in fleet.routers
        for count in fleet.replicas
    ]


def _make_pools(trace: Trace, options: SimulationOptions, count: int):
    hash_trace = trace.block_size is not None
    block_size = trace.block_size if hash_trace else options.block_size
    assert block_size is not None
    if options.policy == "radix":
        unit_tokens = block_size if hash_trace else 1
        defer = options.defers_caching
        pools = [
            RadixPolicy(options.cache_blocks, block_size, None, unit_tokens, defer)
            for _ in range(count)
        ]
        return pools, block_size
    bound = every_block(trace, block_size)
    capacity = bound if options.cache_blocks is None else min(options.cache_blocks, bound)
    settings = None if hash_trace else HashSettings(algo=options.hash_algo, block_size=block_size)
    defer = options.defers_caching
    pools = [VllmPolicy(capacity, block_size, settings, defer) for _ in range(count)]
    return pools, block_size


class _Probe:
    """How many tokens of a request each pool holds now, without touching any pool."""

    def __init__(self, pools: list):
        self.pools = pools
        self.radix = isinstance(pools[0], RadixPolicy)

    def cached_tokens(self, record: TraceRecord, now: float) -> list[int]:
        pools = self.pools
        if self.radix:
            return [pool.peek(record, now) for pool in pools]
        hash_ids = record.hash_ids
        if hash_ids is not None:  # `VllmPolicy.peek` of each pool, its index probed in C
            size, length = pools[0].block_size, record.input_length
            return [
                min(pool.pool.cached_block_hash_to_block.num_leading_hits(hash_ids) * size, length)
                for pool in pools
            ]
        keys = pools[0].lookup_keys(record)  # hashed once for every pool
        if keys is None:
            return [0] * len(pools)
        return [pool.peek(record, now, keys) for pool in pools]


def serve_serial(pool, record: TraceRecord, now: float, block_size: int) -> tuple[int, int]:
    """`pool.serve` for a serial replay: (cached tokens, hit blocks), or `CapacityTooSmall`
    where the pool cannot hold the request."""
    served = pool.serve(record, now)
    if served is None:
        raise CapacityTooSmall(cdiv(record.input_length, block_size))
    return served


def too_small_error(
    trace: Trace, options: SimulationOptions, position: int, needed_blocks: int, block_size: int
) -> UsageError:
    """The error of a replica too small for the request at `position`."""
    record = trace.records[position]
    where = f"line {record.line}" if record.line is not None else f"request {position}"
    return UsageError(
        f"{trace.source}: a replica of {options.cache_blocks} blocks cannot hold the"
        f" request at {where} ({record.input_length} tokens need"
        f" {needed_blocks} blocks of {block_size}); raise --cache-blocks"
    )


def simulate_fleet(
    trace: Trace,
    options: SimulationOptions,
    num_replicas: int,
    router_name: str,
    parameters: dict[str, Any] | None = None,
    chars_per_token: int = DEFAULT_CHARS_PER_TOKEN,
    progress: Progress = None,
) -> ReplayReport:
    """Replay `trace` over `num_replicas` pools behind router `router_name`."""
    return _simulate_fleet(
        trace, options, num_replicas, router_name, parameters or {}, chars_per_token, progress
    )


def _simulate_fleet(
    trace, options, num_replicas, router_name, parameters, chars_per_token, progress
) -> ReplayReport:
    if options.policy not in FLEET_POLICIES:
        raise UsageError(f"--replicas applies to --policy vllm and radix, not {options.policy}")
    pools, block_size = _make_pools(trace, options, num_replicas)
    router = make_router(router_name, num_replicas, parameters)
    values = asdict(build_parameters(router_name, parameters))
    probe = _Probe(pools)
    state = FleetState.empty(num_replicas, block_size, options.cache_blocks)
    stats = [ReplicaStats(replica) for replica in range(num_replicas)]
    summary = FleetSummary(router_name, num_replicas, values)
    timed = options.concurrency == "timed"
    running: list[list] = [[] for _ in range(num_replicas)]
    prefilling: list[list] = [[] for _ in range(num_replicas)]  # deferred blocks per replica
    due: list[float] = []  # the times of both, every replica's: when some may be due
    slots = [PrefillSlots(options.prefill_slots) for _ in range(num_replicas)]
    model = options.ttft
    overhead, per_token, per_pair = model.overhead_ms, model.ms_per_token, model.ms_per_pair
    decode_ms_per_token = 1000.0 / options.decode_tokens_per_s
    ttfts: Counter[float] = Counter()
    ttfts_cold: Counter[float] = Counter()
    query_tokens = hit_tokens = hit_requests = 0
    for position, record in enumerate(trace.records):
        now = start = record.timestamp_ms
        if timed and due and due[0] <= now:  # prefills that ended, requests that finished
            while due and due[0] <= now:
                heapq.heappop(due)
            for replica, heap in enumerate(running):
                ending = prefilling[replica]
                if ending and ending[0][0] <= now:
                    publish_prefilled(ending, now)
                if heap and heap[0][0] <= now:
                    state.active_blocks[replica] -= release_finished(pools[replica], heap, now)
                    state.in_flight[replica] = len(heap)
        cached_by_replica = probe.cached_tokens(record, now)
        units, unit_chars, text_chars = text_view(record, trace.block_size, chars_per_token)
        request = RoutedRequest(record, units, unit_chars, text_chars, cached_by_replica, now)
        chosen = router.route(request, state)
        assert 0 <= chosen < num_replicas, (router_name, chosen)
        pool = pools[chosen]
        try:
            if timed:
                begin = slots[chosen].begin(now)
                admission, start, freed = admit_waiting(
                    pool, running[chosen], record, begin, block_size, prefilling[chosen]
                )
                state.active_blocks[chosen] -= freed
                cached, hit_blocks = admission.cached_tokens, admission.hit_blocks
            else:
                cached, hit_blocks = serve_serial(pool, record, now, block_size)
                assert cached == cached_by_replica[chosen], (position, cached, cached_by_replica)
        except CapacityTooSmall as failure:
            raise too_small_error(
                trace, options, position, failure.needed_blocks, block_size
            ) from None
        best = max(cached_by_replica)
        summary.best_hit_tokens += best
        if cached_by_replica[chosen] < best:
            summary.misrouted_requests += 1
            summary.misrouted_tokens += best - cached_by_replica[chosen]
        num_tokens = record.input_length
        cold = overhead + per_token * num_tokens + per_pair * (num_tokens * (num_tokens + 1) // 2)
        prefill = cold - per_token * cached - per_pair * (cached * (cached + 1) // 2)
        ttfts[(start - now) + prefill] += 1
        ttfts_cold[cold] += 1
        if timed:
            finish = start + prefill + record.output_length * decode_ms_per_token
            blocks = cdiv(num_tokens, block_size)
            heapq.heappush(running[chosen], (finish, position, admission, blocks))
            heapq.heappush(due, finish)
            slots[chosen].occupy(start + prefill)
            if admission.unpublished is not None:
                heapq.heappush(prefilling[chosen], (start + prefill, position, admission))
                heapq.heappush(due, start + prefill)
            state.in_flight[chosen] = len(running[chosen])
            state.active_blocks[chosen] += blocks
        state.routed[chosen] += 1
        replica_stats = stats[chosen]
        replica_stats.requests += 1
        replica_stats.prompt_tokens += num_tokens
        replica_stats.hit_tokens += cached
        query_tokens += num_tokens
        hit_tokens += cached
        if hit_blocks:
            hit_requests += 1
            replica_stats.hit_requests += 1
        if progress is not None and position % 1000 == 999:
            progress(1000)
    for replica, heap in enumerate(running):
        while heap:
            pools[replica].release(heapq.heappop(heap)[2])
    for replica_stats, pool in zip(stats, pools, strict=True):
        replica_stats.evicted_blocks = pool.evicted_blocks
        replica_stats.peak_used_blocks = pool.peak_used_blocks
    summary.replicas = stats
    return fleet_report(
        trace,
        options,
        block_size,
        summary,
        (query_tokens, hit_tokens, hit_requests),
        ttfts,
        ttfts_cold,
    )


def fleet_report(
    trace: Trace,
    options: SimulationOptions,
    block_size: int,
    summary: FleetSummary,
    totals: tuple[int, int, int],
    ttfts: Counter[float],
    ttfts_cold: Counter[float],
) -> ReplayReport:
    """The report of a fleet replay: `totals` are the query tokens, hit tokens and hit
    requests over every replica (`summary.replicas` holds each one's)."""
    query_tokens, hit_tokens, hit_requests = totals
    stats = summary.replicas
    num_requests = len(trace.records)
    return ReplayReport(
        source=trace.source,
        trace_format=trace.format,
        policy=options.policy,
        concurrency=options.concurrency,
        block_size=block_size,
        capacity_blocks=options.cache_blocks,
        requests=num_requests,
        query_tokens=query_tokens,
        hit_tokens=hit_tokens,
        token_hit_rate=hit_tokens / query_tokens if query_tokens else 0.0,
        request_hit_rate=hit_requests / num_requests if num_requests else 0.0,
        hit_requests=hit_requests,
        evicted_blocks=sum(s.evicted_blocks for s in stats),
        peak_used_blocks=sum(s.peak_used_blocks for s in stats),
        kv_bytes_per_token=options.kv_bytes_per_token,
        kv_bytes_saved=0,
        peak_shared_blocks=0,
        prefill_kv_bytes_reused=hit_tokens * options.kv_bytes_per_token,
        prefill_tokens_saved=hit_tokens,
        skipped_lines=trace.num_skipped,
        reordered=trace.reordered,
        ttft_ms=distribution(ttfts),
        ttft_uncached_ms=distribution(ttfts_cold),
        observed_cached_tokens=observed_cached_total(trace.records),
        ttft_model=options.ttft,
        calibration=options.calibration,
        fleet=summary,
    )
