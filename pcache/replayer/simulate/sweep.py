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
from bisect import bisect_right
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from pcache.cache.stack_sweep import CapacityOutcome, stack_pass, sweep_pool, unlimited_pool
from pcache.replayer.report import ReplayReport, RequestOutcome
from pcache.replayer.simulate.driver import (
    SimulationOptions,
    _report,
    simulate,
    sweep_capacities,
)
from pcache.text.prefix import common_prefix_length, common_run_length
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


def block_keys(trace: Trace, block_size: int) -> tuple[list[array], int]:
    """Each token record's full blocks as dense integers (see the module docstring), and how
    many there are; the blocks a record shares with the record before it (same salt) are
    that record's.

    A block first seen after a block first seen is new too (its parent is): from a prompt's
    first new block on, its blocks are numbered in a row, a run, and only the run's first
    block is looked up by (parent, tokens); a later prompt through a run is compared with the
    run's tokens, as far as it agrees, instead of block by block.
    """
    heads: dict = {}  # (parent, a block's tokens): the number of a run's first block
    run_first: list[int] = []  # each run's first number, increasing
    run_tokens: list[Sequence[int]] = []  # the prompt whose blocks the run numbers
    run_start: list[int] = []  # where the run's first block starts in it
    num_ids = 0
    keys: list[array] = []
    previous: tuple[object, Sequence[int], array] | None = None
    guess = 0  # the tokens of full blocks the last record shared with the one before it
    for record in trace.records:
        tokens = record.token_ids
        assert tokens is not None
        root: object = ("salt", record.cache_salt) if record.cache_salt else None
        full = len(tokens) // block_size
        parent, ids, position = root, array("q"), 0  # position: the blocks numbered
        if previous is not None and previous[0] == root:
            shared = _shared_blocks(tokens, previous[1], block_size, guess)
            guess = shared * block_size
            if shared:
                ids = previous[2][:shared]
                parent, position = ids[-1], shared
        while position < full:
            start = position * block_size
            if isinstance(parent, int):  # the blocks after `parent` in its run, if they agree
                run = bisect_right(run_first, parent) - 1
                last = run_first[run + 1] - 1 if run + 1 < len(run_first) else num_ids - 1
                offset = run_start[run] + (parent + 1 - run_first[run]) * block_size
                source = run_tokens[run]
                if (
                    parent < last
                    and tokens[start : start + block_size] == source[offset : offset + block_size]
                ):
                    agreed = common_run_length(tokens, start, source, offset)
                    along = min(agreed // block_size, last - parent, full - position)
                    ids.extend(range(parent + 1, parent + 1 + along))  # (one at least)
                    parent += along
                    position += along
                    continue
            key = (parent, tuple(tokens[start : start + block_size]))
            found = heads.get(key)
            if found is not None:
                ids.append(found)
                parent = found
                position += 1
                continue
            heads[key] = num_ids  # new from here: one run to the prompt's last full block
            run_first.append(num_ids)
            run_tokens.append(tokens)
            run_start.append(start)
            ids.extend(range(num_ids, num_ids + full - position))
            num_ids += full - position
            break
        keys.append(ids)
        previous = (root, tokens, ids)
    return keys, num_ids


def dense_hash_ids(trace: Trace) -> tuple[list[np.ndarray], int]:
    """Each hash-id record's ids renumbered `0, 1, ...` (equal ids, equal numbers), and how
    many distinct ids there are."""
    lengths = [len(record.hash_ids or ()) for record in trace.records]
    if not sum(lengths):
        return [np.zeros(0, dtype=np.int64) for _ in lengths], 0
    every = np.concatenate(
        [np.asarray(record.hash_ids or (), dtype=np.int64) for record in trace.records]
    )
    distinct, numbers = np.unique(every, return_inverse=True)
    return np.split(numbers, np.cumsum(lengths)[:-1]), len(distinct)


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
    keys: Sequence[Sequence[int]]
    keys, num_ids = dense_hash_ids(trace) if hash_ids else block_keys(trace, block_size)
    lengths = [record.input_length for record in trace.records]
    total = sum(len(ids) for ids in keys)
    requests = zip(keys, lengths, strict=True)
    stack = stack_pass(requests, block_size, hash_ids, num_ids, total)
    free = unlimited_pool(stack)
    unlimited = _assemble(trace, unlimited_options, block_size, free, keep_requests)
    capacities = sweep_capacities(trace, options, points, free.peak_used_blocks)
    # a pool at least as large as the blocks the unlimited one ever used evicts nothing: its
    # outcome is the unlimited one's, and only the smaller capacities need the stack pass
    evicting = [size for size in capacities if size < free.peak_used_blocks]
    outcomes = sweep_pool(stack, evicting)
    outcomes += [replace(free, capacity=size) for size in capacities[len(evicting) :]]
    reports = []
    for size, outcome in zip(capacities, outcomes, strict=True):
        keep = keep_requests and size == capacities[-1]
        sized = replace(options, cache_blocks=size)
        if outcome.exact:
            same = keep and outcome.cached_tokens is free.cached_tokens  # (the unlimited's)
            given = unlimited.per_request if same else None
            reports.append(_assemble(trace, sized, block_size, outcome, keep, given))
        else:
            reports.append(simulate(trace, sized, keep_requests=keep))
    return Sweep(reports, unlimited)


def _assemble(
    trace: Trace,
    options: SimulationOptions,
    block_size: int,
    outcome: CapacityOutcome,
    keep_requests: bool,
    per_request: list[RequestOutcome] | None = None,
) -> ReplayReport:
    """The `ReplayReport` of one capacity's outcome, as `simulate` writes it; `per_request`:
    the outcomes kept, if known (another report's, of the same cached tokens)."""
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
    if per_request is None:
        per_request = _outcomes(records, cached, model) if keep_requests else []
    else:
        per_request = list(per_request)
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


def _outcomes(records: Sequence, cached: Sequence[int], model) -> list[RequestOutcome]:
    """Each request's outcome with `cached` tokens cached, as `simulate` keeps it."""
    overhead, per_token, per_pair = model.overhead_ms, model.ms_per_token, model.ms_per_pair
    per_request = []
    for record, hit in zip(records, cached, strict=True):
        num_tokens = record.input_length
        cold = overhead + per_token * num_tokens + per_pair * (num_tokens * (num_tokens + 1) // 2)
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
    return per_request
