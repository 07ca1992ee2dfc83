"""`replay --simulate` of a hash-id trace file as it is read: memory bounded by the cache.

The records are served 1,000 at a time and let go; what stays is the cache (the pool's
blocks, or for an unlimited cache the set of ids seen), the counts of (prompt tokens, cached
tokens) pairs behind the TTFT distributions, and the skipped lines. The report equals
`simulate` over the whole trace: an unlimited vllm cache never evicts, so a request hits the
longest run of leading ids seen before (`pcache.cache.stack_sweep.unlimited_pool`), and a
pool larger than the trace can fill behaves as one of the trace's footprint. A trace that
must be reordered, or whose lines disagree on the block size, is read whole as before.

Serial replays through the vllm policy, without per-request rows, stream; anything else
(`--concurrency timed`, the radix and provider policies, `--output`, `--capacity-sweep`,
standard input) reads the whole trace.
"""

from __future__ import annotations

import os
from array import array
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from typing import Any

from pcache.cache.kv_cache_manager import cdiv
from pcache.replayer.miss_reasons import MissLedger, MissReasons, summed
from pcache.replayer.report import ReplayReport
from pcache.replayer.simulate.driver import (
    SimulationOptions,
    _capacity_error,
    _report,
    ttft_counts,
    watch_admission,
)
from pcache.replayer.simulate.policies import CapacityTooSmall, VllmPolicy
from pcache.traces.readers import NotStreamable, stream_hash_trace
from pcache.traces.record import Trace, TraceRecord

BATCH = 1000
DIRECT_POOL_BLOCKS = 1 << 22
"""A capacity up to this many blocks is built as given; a larger one is first bounded by the
trace's footprint (one more pass over the file), as `simulate` bounds it."""


DENSE_IDS = 1 << 28
"""Ids below this are marked seen in a byte array (Mooncake's and pcache's traces number
their blocks densely from 0); any other id moves the cache to a set."""


class UnlimitedHashPolicy:
    """A vllm pool that never evicts, over hash ids: the ids seen so far, a byte per id while
    the ids are small (a set of ints takes some 70 bytes an id)."""

    def __init__(self, block_size: int):
        import numpy as np

        self.np = np
        self.block_size = block_size
        self.flags = np.zeros(1 << 16, dtype=np.bool_)
        self.seen: set | None = None
        self.evicted_blocks = 0
        self.peak_used_blocks = 0

    def serve_all(self, records: Sequence[TraceRecord], cached: list[int]) -> int:
        block_size = self.block_size
        hit_requests = used = 0
        for record in records:
            hash_ids = record.hash_ids
            if self.seen is None:
                hits = self._dense(hash_ids)
            if self.seen is not None:
                hits = self._sparse(hash_ids)
            used += len(hash_ids) - hits
            if hits:
                hit_requests += 1
                hit_tokens = hits * block_size
                cached.append(min(hit_tokens, record.input_length))
            else:
                cached.append(0)
        self.peak_used_blocks += used
        return hit_requests

    def _dense(self, hash_ids) -> int:
        """The leading run of ids seen, all ids then marked seen; the set takes over (and
        this returns 0 unmarked) when an id is not a small non-negative integer."""
        np = self.np
        if not len(hash_ids):
            return 0
        ids = np.frombuffer(hash_ids, dtype=np.int64) if isinstance(hash_ids, array) else None
        if ids is None or int(ids.min()) < 0 or int(ids.max()) >= DENSE_IDS:
            self.seen = set(np.flatnonzero(self.flags).tolist())
            return 0
        largest = int(ids.max())
        if largest >= len(self.flags):
            grown = np.zeros(max(2 * len(self.flags), largest + 1), dtype=np.bool_)
            grown[: len(self.flags)] = self.flags
            self.flags = grown
        marked = self.flags[ids]
        hits = len(ids) if marked.all() else int(marked.argmin())
        if hits < len(ids):
            self.flags[ids] = True
        return hits

    def _sparse(self, hash_ids) -> int:
        assert self.seen is not None
        contains = self.seen.__contains__
        hits = 0
        for block_hash in hash_ids:
            if not contains(block_hash):
                break
            hits += 1
        if hits < len(hash_ids):
            self.seen.update(hash_ids)
        return hits


def streams(trace: Any, options: SimulationOptions, keep_requests: bool, sweep: bool) -> bool:
    """Whether this replay can stream `trace`."""
    return (
        isinstance(trace, str | os.PathLike)
        and os.fspath(trace) != "-"
        and options.policy == "vllm"
        and options.concurrency == "serial"
        and not keep_requests
        and not sweep
    )


def simulate_file(
    path: str | os.PathLike[str],
    sized: Callable[[int], SimulationOptions],
    *,
    trace_format: str = "auto",
    strict: bool = False,
    block_size: int | None = None,
    limit: int | None = None,
    progress: Callable[[int], None] | None = None,
) -> tuple[ReplayReport, Trace] | None:
    """The replay of a hash-id trace file as it is read, and the trace's header (no
    records); None when it holds request bodies or must be read whole. `sized(block_size)`:
    the options for the trace's block size (a capacity in GiB becomes blocks)."""
    read = dict(trace_format=trace_format, strict=strict, block_size=block_size)
    opened = stream_hash_trace(path, **read)
    if opened is None:
        return None
    header, records = opened
    assert header.block_size is not None
    options = sized(header.block_size)
    capacity = options.cache_blocks
    try:
        if capacity is not None and capacity > DIRECT_POOL_BLOCKS:
            footprint = _footprint(path, read, limit)
            opened = stream_hash_trace(path, **read)
            assert opened is not None
            header, records = opened
            capacity = max(min(capacity, footprint), 1)
        policy: Any = (
            UnlimitedHashPolicy(header.block_size)
            if capacity is None
            else VllmPolicy(capacity, header.block_size, None, record_events=options.explain_misses)
        )
        return _serve(header, records, policy, options, limit, progress), header
    except NotStreamable:
        return None


def _footprint(path, read: dict, limit: int | None) -> int:
    """The blocks an unlimited cache uses over the trace (a pass that keeps only ids)."""
    opened = stream_hash_trace(path, **read)
    assert opened is not None
    header, records = opened
    policy = UnlimitedHashPolicy(header.block_size)
    cached: list[int] = []
    for batch in _batches(records, limit):
        policy.serve_all(batch, cached)
        cached.clear()
    return policy.peak_used_blocks or 1


def _batches(records: Iterator[TraceRecord], limit: int | None) -> Iterator[list[TraceRecord]]:
    """Records in batches, the first `limit` only; the rest are still read (their skipped
    lines are counted, and their order checked, as `read_trace` does)."""
    batch: list[TraceRecord] = []
    served = 0
    for record in records:
        if limit is not None and served >= limit:
            continue
        batch.append(record)
        served += 1
        if len(batch) == BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


def _serve(
    header: Trace,
    records: Iterator[TraceRecord],
    policy,
    options: SimulationOptions,
    limit: int | None,
    progress: Callable[[int], None] | None,
) -> ReplayReport:
    block_size = header.block_size
    assert block_size is not None
    pairs: Counter[tuple[int, int]] = Counter()
    cached: list[int] = []
    hit_requests = served = 0
    observed = None
    ledger = MissLedger() if options.explain_misses and isinstance(policy, VllmPolicy) else None
    missed: list[MissReasons] = []
    serve_all = policy.serve_all if ledger is None else partial(_explained, policy, ledger, missed)
    for batch in _batches(records, limit):
        try:
            hit_requests += serve_all(batch, cached)
        except CapacityTooSmall as failure:
            record = batch[failure.position or 0]
            position = served + (failure.position or 0)
            raise _capacity_error(header, options, record, position, failure, block_size) from None
        pairs.update(zip((record.input_length for record in batch), cached, strict=True))
        for record in batch:
            if record.observed_cached_tokens is not None:
                observed = (observed or 0) + record.observed_cached_tokens
        served += len(batch)
        cached.clear()
        if progress is not None and len(batch) == BATCH:
            progress(BATCH)
    ttfts, ttfts_cold = ttft_counts(options.ttft, pairs)
    query_tokens = sum(num_tokens * count for (num_tokens, _), count in pairs.items())
    hit_tokens = sum(hit * count for (_, hit), count in pairs.items())
    report = _report(
        header,
        options,
        policy,
        block_size,
        query_tokens,
        hit_tokens,
        hit_requests,
        ttfts,
        ttfts_cold,
        observed,
        [],
        num_requests=served,
    )
    if ledger is not None:
        report.miss_reasons = summed(missed)
    return report


def _explained(
    policy: VllmPolicy,
    ledger: MissLedger,
    missed: list[MissReasons],
    records: Sequence[TraceRecord],
    cached: list[int],
) -> int:
    """`serve_all`, each request admitted, its misses explained (`missed`), then released."""
    hit_requests = 0
    for position, record in enumerate(records):
        try:
            admission = policy.admit(record, record.timestamp_ms)
        except CapacityTooSmall as failure:
            raise CapacityTooSmall(failure.needed_blocks, position) from None
        if admission is None:
            raise CapacityTooSmall(cdiv(record.input_length, policy.block_size), position)
        missed.append(watch_admission(policy, ledger, record, admission, policy.block_size))
        policy.release(admission)
        cached.append(admission.cached_tokens)
        hit_requests += admission.hit_blocks > 0
    return hit_requests
