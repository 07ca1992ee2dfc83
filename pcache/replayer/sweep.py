"""The capacity sweep (`replay --capacity-sweep`, `pcache report`): one report per capacity.

A serial replay through the vllm pool runs every capacity in one pass
(`pcache.cache.stack_sweep`), over block identities computed once per request: for token
requests each full block is interned as (its parent's identity, its tokens), the first
block's parent being the request's cache salt, so two blocks share an identity exactly when
the chained hashes the pool would compute are equal. A capacity the one pass cannot vouch for
(a block cached twice, then an eviction) is replayed in the pool, as is every other policy
and the timed concurrency. `tests/test_capacity_sweep.py` compares the two on random traces.
"""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace

from pcache.cache.stack_sweep import CapacityOutcome, sweep_pool, unlimited_pool
from pcache.prefix import common_prefix_length
from pcache.replayer.report import ReplayReport, RequestOutcome
from pcache.replayer.simulate import (
    SimulationOptions,
    _report,
    simulate,
    sweep_capacities,
)
from pcache.traces.record import Trace


@dataclass(slots=True)
class Sweep:
    """The reports of a sweep, smallest capacity first, and of an unlimited cache."""

    reports: list[ReplayReport]
    unlimited: ReplayReport


@dataclass(slots=True)
class _PoolFigures:
    evicted_blocks: int
    peak_used_blocks: int


def block_keys(trace: Trace, block_size: int) -> list[Sequence[int]]:
    """Each token record's full blocks as interned integers (see the module docstring); the
    blocks a record shares with the record before it (same salt) are that record's."""
    interned: dict = {}
    intern = interned.setdefault
    keys: list[Sequence[int]] = []
    previous: tuple[object, Sequence[int], array] | None = None
    guess = 0  # the tokens of full blocks the last record shared with the one before it
    for record in trace.records:
        tokens = record.token_ids
        assert tokens is not None
        root: object = ("salt", record.cache_salt) if record.cache_salt else None
        parent, ids, first = root, array("q"), 0
        if previous is not None and previous[0] == root:
            shared = _shared_blocks(tokens, previous[1], block_size, guess)
            guess = shared * block_size
            if shared:
                ids = previous[2][:shared]
                parent, first = ids[-1], shared * block_size
        for start in range(first, len(tokens) - block_size + 1, block_size):
            key = (parent, tuple(tokens[start : start + block_size]))
            parent = intern(key, len(interned))
            ids.append(parent)
        keys.append(ids)
        previous = (root, tokens, ids)
    return keys


def _shared_blocks(tokens: Sequence[int], before: Sequence[int], block_size: int, guess: int):
    """The full blocks `tokens` and `before` share from the start; `guess` (a multiple of
    `block_size`), when right, is checked with two comparisons instead of a search."""
    if 0 < guess <= min(len(tokens), len(before)) and tokens[:guess] == before[:guess]:
        following = tokens[guess : guess + block_size]
        if len(following) < block_size or following != before[guess : guess + block_size]:
            return guess // block_size
    return common_prefix_length(tokens, before) // block_size


def one_pass_applies(trace: Trace, options: SimulationOptions) -> bool:
    return (
        options.policy == "vllm"
        and options.concurrency == "serial"
        and all(not record.output_token_ids for record in trace.records)
    )


def capacity_sweep(
    trace: Trace, options: SimulationOptions, points: int, keep_requests: bool = False
) -> Sweep:
    """Reports at `sweep_capacities`' capacities and unlimited; `keep_requests`: the largest
    capacity's report and the unlimited one keep their per-request outcomes."""
    unlimited_options = replace(options, cache_blocks=None, policy="vllm")
    if not one_pass_applies(trace, options):
        unlimited = simulate(trace, unlimited_options, keep_requests=keep_requests)
        capacities = sweep_capacities(trace, options, points, unlimited.peak_used_blocks)
        reports = [
            simulate(trace, replace(options, cache_blocks=size), keep_requests=keep_requests)
            if size == capacities[-1]
            else simulate(trace, replace(options, cache_blocks=size))
            for size in capacities
        ]
        return Sweep(reports, unlimited)
    hash_ids = trace.block_size is not None
    block_size = trace.block_size if hash_ids else options.block_size
    if hash_ids:
        keys: list[Sequence] = [record.hash_ids or () for record in trace.records]
    else:
        keys = block_keys(trace, block_size)
    lengths = [record.input_length for record in trace.records]
    free = unlimited_pool(zip(keys, lengths, strict=True), block_size, hash_ids)
    unlimited = _assemble(trace, unlimited_options, block_size, free, keep_requests)
    capacities = sweep_capacities(trace, options, points, free.peak_used_blocks)
    # a pool at least as large as the blocks the unlimited one ever used evicts nothing: its
    # outcome is the unlimited one's, and only the smaller capacities need the stack pass
    evicting = [size for size in capacities if size < free.peak_used_blocks]
    total = sum(len(ids) for ids in keys)
    outcomes = []
    if evicting:
        requests = zip(keys, lengths, strict=True)
        outcomes = sweep_pool(requests, block_size, evicting, hash_ids, total)
    outcomes += [replace(free, capacity=size) for size in capacities[len(evicting) :]]
    reports = []
    for size, outcome in zip(capacities, outcomes, strict=True):
        keep = keep_requests and size == capacities[-1]
        sized = replace(options, cache_blocks=size)
        if outcome.exact:
            reports.append(_assemble(trace, sized, block_size, outcome, keep))
        else:
            reports.append(simulate(trace, sized, keep_requests=keep))
    return Sweep(reports, unlimited)


def _assemble(
    trace: Trace,
    options: SimulationOptions,
    block_size: int,
    outcome: CapacityOutcome,
    keep_requests: bool,
) -> ReplayReport:
    """The `ReplayReport` of one capacity's outcome, as `simulate` writes it."""
    records = trace.records
    cached = outcome.cached_tokens
    model = options.ttft
    overhead, per_token, per_pair = model.overhead_ms, model.ms_per_token, model.ms_per_pair
    ttfts: Counter[float] = Counter()
    ttfts_cold: Counter[float] = Counter()
    lengths = [record.input_length for record in records]
    for (num_tokens, hit), count in Counter(zip(lengths, cached, strict=True)).items():
        cold = overhead + per_token * num_tokens + per_pair * (num_tokens * (num_tokens + 1) // 2)
        ttfts_cold[cold] += count
        ttfts[cold - per_token * hit - per_pair * (hit * (hit + 1) // 2)] += count
    per_request: list[RequestOutcome] = []
    if keep_requests:
        for record, hit in zip(records, cached, strict=True):
            num_tokens = record.input_length
            cold = (
                overhead + per_token * num_tokens + per_pair * (num_tokens * (num_tokens + 1) // 2)
            )
            prefill = cold - per_token * hit - per_pair * (hit * (hit + 1) // 2)
            now = record.timestamp_ms
            per_request.append(
                RequestOutcome(
                    record.index,
                    record.line,
                    now,
                    num_tokens,
                    hit,
                    round((now - now) + prefill, 3),
                    round(cold, 3),
                    now,
                    record.observed_cached_tokens,
                )
            )
    observations = [
        record.observed_cached_tokens
        for record in records
        if record.observed_cached_tokens is not None
    ]
    figures = _PoolFigures(outcome.evicted_blocks, outcome.peak_used_blocks)
    return _report(
        trace,
        options,
        figures,
        block_size,
        sum(lengths),
        sum(cached),
        outcome.hit_requests,
        ttfts,
        ttfts_cold,
        sum(observations) if observations else None,
        per_request,
    )
