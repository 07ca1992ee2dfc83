"""A serial fleet replay split in two: one routing pass, then one task per replica.

`simulate_fleet` interleaves routing and serving: each request is routed, then served by its
replica's pool. Where the router's decisions do not depend on the pools, the two separate:

1. **The routing pass** (sequential, in the caller): the router sees every request in arrival
   order as in `simulate_fleet`, with the loads it tracks itself (in a serial replay nothing
   is in flight when a request arrives: every load is 0) and, in place of the pools' cached
   tokens, a sequence that refuses to be read. A router that reads it (`precise`, `dynamo`:
   the exact index a KV-event router builds) depends on the pools; the split is abandoned and
   the replay runs as `simulate_fleet` does, routing and serving in one pass.
2. **One task per replica** (`simulate_replica`, run by the executor: here, or as a Ray task):
   the replica's pool serves the requests routed to it and, without being touched, is asked
   how many tokens of every other request it holds (router precision compares the chosen
   replica with the best one; the block hashes it looks up are computed once, in the routing
   pass, not once per replica). A pool's state depends only on the requests it served, so
   this is what the pool computes inside `simulate_fleet`.
3. **The merge** (in the caller) reads the replicas' answers request by request, in arrival
   order, with the expressions `simulate_fleet` uses: the report is the same, byte for byte.

Timed replays are not split: a request's wait and finish depend on its pool, and the loads
routers read depend on those.
"""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from pcache.cache.hashing import HashSettings
from pcache.defaults import DEFAULT_CHARS_PER_TOKEN
from pcache.replayer.fleet.driver import (
    _make_pools,
    _Probe,
    fleet_report,
    serve_serial,
    simulate_fleet,
    too_small_error,
)
from pcache.replayer.fleet.report import FleetSummary, ReplicaStats
from pcache.replayer.fleet.routers import build_parameters, make_router
from pcache.replayer.fleet.routers.request import FleetState, RoutedRequest, text_view
from pcache.replayer.report import ReplayReport
from pcache.replayer.simulate.driver import SimulationOptions, ttft_counts
from pcache.replayer.simulate.policies import CapacityTooSmall, probe_token_keys
from pcache.traces.record import Trace

Progress = Callable[[int], None] | None


class ReadsPools(Exception):
    """The router read the pools' cached tokens: its decisions depend on the pools."""


class _Unread(Sequence):
    """The pools' cached tokens during the routing pass: a length, and no values."""

    def __init__(self, length: int):
        self.length = length

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index):
        raise ReadsPools


@dataclass(slots=True)
class ReplicaRun:
    """What one replica's pool did: the tokens it held of every request just before that
    request (served or not), whether each request it served hit, and its pool's totals."""

    cached: array
    hits: bytearray
    evicted_blocks: int
    peak_used_blocks: int
    failure: tuple[int, int] | None = None
    """(position, blocks needed) of the first request the pool could not hold."""


def route_blind(
    trace: Trace,
    num_replicas: int,
    router_name: str,
    parameters: dict[str, Any],
    chars_per_token: int,
    block_size: int,
    capacity_blocks: int | None,
) -> array | None:
    """The replica of each request, routed without the pools; None when the router reads
    them (`ReadsPools`)."""
    router = make_router(router_name, num_replicas, parameters)
    state = FleetState.empty(num_replicas, block_size, capacity_blocks)
    unread: Any = _Unread(num_replicas)
    choices = array("I")
    try:
        for record in trace.records:
            units, unit_chars, text_chars = text_view(record, trace.block_size, chars_per_token)
            request = RoutedRequest(
                record, units, unit_chars, text_chars, unread, record.timestamp_ms
            )
            chosen = router.route(request, state)
            assert 0 <= chosen < num_replicas, (router_name, chosen)
            state.routed[chosen] += 1
            choices.append(chosen)
    except ReadsPools:
        return None
    return choices


def probe_keys(trace: Trace, options: SimulationOptions, block_size: int) -> list | None:
    """The block-hash keys `_Probe` looks up for each request of a token trace in vllm pools,
    hashed once here instead of once per replica task (None: radix pools and hash-id traces
    need none)."""
    if options.policy == "radix" or trace.block_size is not None:
        return None
    settings = HashSettings(algo=options.hash_algo, block_size=block_size)
    return [
        probe_token_keys(record, settings, block_size) if record.input_length else None
        for record in trace.records
    ]


def simulate_replica(
    replica: int, trace: Trace, options: SimulationOptions, choices: array, keys: list | None
) -> ReplicaRun:
    """Serve the requests routed to `replica`, in order, and probe its pool for the others
    (the task an executor runs); `keys`: `probe_keys`."""
    (pool,), block_size = _make_pools(trace, options, 1)
    probe = _Probe([pool])
    cached = array("q", bytes(8 * len(trace.records)))
    hits = bytearray(len(trace.records))
    for position, record in enumerate(trace.records):
        now = record.timestamp_ms
        if choices[position] != replica:
            if keys is None:
                cached[position] = probe.cached_tokens(record, now)[0]
            elif keys[position] is not None:
                cached[position] = pool.peek(record, now, keys[position])
            continue
        try:
            served = serve_serial(pool, record, now, block_size)
        except CapacityTooSmall as too_small:
            failure = (position, too_small.needed_blocks)
            return ReplicaRun(cached, hits, pool.evicted_blocks, pool.peak_used_blocks, failure)
        cached[position] = served[0]
        hits[position] = 1 if served[1] else 0
    return ReplicaRun(cached, hits, pool.evicted_blocks, pool.peak_used_blocks)


def simulate_fleet_split(
    trace: Trace,
    options: SimulationOptions,
    num_replicas: int,
    router_name: str,
    parameters: dict[str, Any] | None = None,
    chars_per_token: int = DEFAULT_CHARS_PER_TOKEN,
    progress: Progress = None,
    *,
    executor: Any,
) -> ReplayReport:
    """`simulate_fleet`'s report, each replica's pool simulated by `executor` where the
    replay is serial and the router does not read the pools; else `simulate_fleet` itself."""
    parameters = parameters or {}
    arguments = (trace, options, num_replicas, router_name, parameters, chars_per_token)
    if options.concurrency != "serial":
        return simulate_fleet(*arguments, progress)
    block_size = trace.block_size if trace.block_size is not None else options.block_size
    choices = route_blind(
        trace,
        num_replicas,
        router_name,
        parameters,
        chars_per_token,
        block_size,
        options.cache_blocks,
    )
    if choices is not None:
        keys = probe_keys(trace, options, block_size)
    if choices is None:
        return simulate_fleet(*arguments, progress)
    replicas = range(num_replicas)
    runs = list(executor.map(simulate_replica, replicas, trace, options, choices, keys))
    return _merge(trace, options, block_size, router_name, parameters, choices, runs, progress)


def _merge(trace, options, block_size, router_name, parameters, choices, runs, progress):
    failures = [run.failure for run in runs if run.failure is not None]
    if failures:
        position, needed = min(failures)
        raise too_small_error(trace, options, position, needed, block_size)
    num_replicas = len(runs)
    values = asdict(build_parameters(router_name, parameters))
    stats = [ReplicaStats(replica) for replica in range(num_replicas)]
    summary = FleetSummary(router_name, num_replicas, values)
    pairs: Counter[tuple[int, int]] = Counter()
    query_tokens = hit_tokens = hit_requests = 0
    columns = [run.cached for run in runs]
    for position, record in enumerate(trace.records):
        chosen = choices[position]
        cached_by_replica = [column[position] for column in columns]
        cached = cached_by_replica[chosen]
        best = max(cached_by_replica)
        summary.best_hit_tokens += best
        if cached < best:
            summary.misrouted_requests += 1
            summary.misrouted_tokens += best - cached
        num_tokens = record.input_length
        pairs[num_tokens, cached] += 1
        replica_stats = stats[chosen]
        replica_stats.requests += 1
        replica_stats.prompt_tokens += num_tokens
        replica_stats.hit_tokens += cached
        query_tokens += num_tokens
        hit_tokens += cached
        if runs[chosen].hits[position]:
            hit_requests += 1
            replica_stats.hit_requests += 1
        if progress is not None and position % 1000 == 999:
            progress(1000)
    for replica_stats, run in zip(stats, runs, strict=True):
        replica_stats.evicted_blocks = run.evicted_blocks
        replica_stats.peak_used_blocks = run.peak_used_blocks
    summary.replicas = stats
    totals = (query_tokens, hit_tokens, hit_requests)
    ttfts, ttfts_cold = ttft_counts(options.ttft, pairs)
    return fleet_report(trace, options, block_size, summary, totals, ttfts, ttfts_cold)
