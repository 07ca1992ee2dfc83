"""Replay a trace against a cache policy without a model (`pcache replay --simulate`).

Semantics:
- `serial` (default): requests in timestamp order; each is admitted (lookup, hits touched,
  new blocks allocated and cached) and frees all its blocks before the next arrives.
- `timed`: a request keeps its blocks until it finishes. It starts at its arrival, or when
  enough running requests finished to make room (running requests are released in order of
  their finish time); it runs for its predicted prefill time plus
  `output_length / decode_tokens_per_s`, and its TTFT includes the wait. Running requests
  hold blocks and compete for capacity; there is no batching slowdown. `prefill_slots`
  (`--prefill-slots N`) lets at most N prefills run at once (a request's prefill, and its
  prefix lookup, wait for a slot, first come first served; its TTFT includes the wait);
  None (default): every prefill starts when its request is admitted.
  When a request's blocks become hits for other requests is each engine's own rule
  (`publish_blocks`, `--publish-blocks`; the default follows the policy):
  - `scheduled` (vllm): from its admission. vLLM publishes a step's full blocks when it
    schedules the step (`cache_full_blocks` in `allocate_slots`), so a request scheduled in
    that step or later hits them while they are being computed; pcache's engine does the
    same. One step per prefill: a prompt longer than vLLM's `max_num_batched_tokens` is
    published chunk by chunk there, all at once here.
  - `prefilled` (radix): when its prefill ends (its first token), as SGLang inserts a prefill
    into its radix tree after the forward pass. A request whose prefill starts while an
    earlier request with the same prefix is still prefilling hits only what was published
    before its own prefill starts, and recomputes the rest: on the vllm pool in blocks of its
    own (both copies stay cached, as vLLM keeps duplicate blocks), in the radix tree in the
    node already inserted (SGLang frees the duplicate when it inserts). Blocks of generated
    tokens are published when the request finishes.

Every admission counts `input_length` query tokens and its cached tokens (token-based, as
vLLM's `PrefixCacheStats`); a request hits when at least one block came from the cache.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from pcache.cache.hashing import HashSettings
from pcache.cache.kv_cache_manager import cdiv
from pcache.cache.profiles import load_profile
from pcache.defaults import DEFAULT_BLOCK_SIZE, DEFAULT_HASH_ALGO
from pcache.errors import UsageError
from pcache.replayer.calibration_used import CalibrationUsed
from pcache.replayer.miss_reasons import MissLedger, MissReasons, summed
from pcache.replayer.report import Bill, ReplayReport, RequestOutcome, distribution
from pcache.replayer.simulate.policies import (
    Admission,
    CapacityTooSmall,
    PrefillSlots,
    ProviderPolicy,
    RadixPolicy,
    VllmPolicy,
    admit_waiting,
    publish_prefilled,
    release_finished,
)
from pcache.replayer.ttft import TtftModel
from pcache.traces.record import Trace, TraceRecord

ENGINE_POLICIES = ("vllm", "radix")
PROVIDER_POLICIES = ("openai", "anthropic", "gemini", "bedrock", "deepseek")
POLICIES = ENGINE_POLICIES + PROVIDER_POLICIES
CONCURRENCY = ("serial", "timed")
PUBLISH_BLOCKS = ("scheduled", "prefilled")
ENGINE_PUBLISH = {"vllm": "scheduled", "radix": "prefilled"}
"""When each engine's computed blocks become hits (timed replays): vLLM at scheduling, SGLang
after the prefill's forward pass."""


MAX_CACHE_BLOCKS = 1 << 40  # far beyond any real pool; keeps reports within JSON's integers


@dataclass(frozen=True, slots=True)
class SimulationOptions:
    """How to replay: policy, capacity (None: unlimited), timing and cost models."""

    policy: str = "vllm"
    cache_blocks: int | None = None
    block_size: int = DEFAULT_BLOCK_SIZE
    concurrency: str = "serial"
    decode_tokens_per_s: float = 50.0
    ttft: TtftModel = field(default_factory=TtftModel)
    kv_bytes_per_token: int = 131072
    hash_algo: str = DEFAULT_HASH_ALGO
    calibration: CalibrationUsed | None = None
    """The calibration file `ttft` was read from (None: defaults or coefficients given)."""
    publish_blocks: str | None = None
    """Timed: `scheduled` or `prefilled` (None: the policy's engine, `ENGINE_PUBLISH`)."""
    prefill_slots: int | None = None
    """Timed: at most this many prefills at once per engine (None: no limit)."""
    explain_misses: bool = False
    """vllm policy: give every missed token its reason (`pcache.replayer.miss_reasons`), per
    request and summed; the replay then admits each request on its own (no batches)."""

    def __post_init__(self) -> None:  # checked for users by the drivers' options
        assert self.policy in POLICIES and self.concurrency in CONCURRENCY
        assert self.publish_blocks in (None, *PUBLISH_BLOCKS)
        assert self.prefill_slots is None or self.prefill_slots >= 1
        assert self.cache_blocks is None or 1 <= self.cache_blocks <= MAX_CACHE_BLOCKS
        assert self.decode_tokens_per_s > 0

    @property
    def defers_caching(self) -> bool:
        """A timed replay whose blocks become hits only when their prefill ends."""
        chosen = self.publish_blocks or ENGINE_PUBLISH.get(self.policy, "scheduled")
        return self.concurrency == "timed" and chosen == "prefilled"


def _make_policy(trace: Trace, options: SimulationOptions, record_events: bool = False):
    hash_trace = trace.block_size is not None
    block_size = trace.block_size if hash_trace else options.block_size
    unit_tokens = block_size if hash_trace else 1
    if options.policy in PROVIDER_POLICIES:
        return ProviderPolicy(load_profile(options.policy), block_size, unit_tokens), block_size
    capacity = options.cache_blocks
    defer = options.defers_caching
    if options.policy == "radix":
        return RadixPolicy(capacity, block_size, None, unit_tokens, defer), block_size
    # A pool never needs more blocks than the trace can fill: a larger --cache-blocks behaves
    # as unlimited, without allocating (or hanging on) blocks no request can reach. Deferred
    # publication recomputes prefixes still being prefilled, in blocks of their own.
    bound = every_block if defer else _unlimited_capacity
    footprint = bound(trace, block_size)
    capacity = footprint if capacity is None else min(capacity, footprint)
    settings = None if hash_trace else HashSettings(algo=options.hash_algo, block_size=block_size)
    return VllmPolicy(capacity, block_size, settings, defer, record_events), block_size


def every_block(trace: Trace, block_size: int) -> int:
    """Every block of every request: a pool this big never evicts, whatever is shared."""
    if trace.block_size is not None:
        return sum(len(record.hash_ids or ()) for record in trace.records) or 1
    return (
        sum(
            cdiv(record.input_length + len(record.output_token_ids or ()), block_size)
            for record in trace.records
        )
        or 1
    )


def _unlimited_capacity(trace: Trace, block_size: int) -> int:
    """Blocks a pool needs to never evict.

    Hash-id traces: nothing is evicted and every listed id is cached, so the cache holds
    exactly the ids seen so far and each request allocates one block per id after its leading
    run of seen ids (and one per repeat of an id within it). Token traces: every block of
    every request (an upper bound).
    """
    if trace.block_size is None:
        return sum(cdiv(r.input_length, block_size) for r in trace.records) or 1
    seen: set = set()
    total = 0
    for record in trace.records:
        hash_ids = record.hash_ids
        total += len(hash_ids) - len(set(hash_ids))  # an id repeated in a request: its own block
        run = 0
        for block_hash in hash_ids:
            if block_hash not in seen:
                break
            run += 1
        else:
            continue  # every id seen: nothing allocated, nothing new
        total += len(hash_ids) - run
        seen.update(hash_ids)
    return total or 1


@dataclass(frozen=True, slots=True)
class Watched:
    """What a replay is asked to keep beyond its report (`simulate`'s `watched`)."""

    events: list[tuple] | None = None
    """A list the vllm pool's KV events are appended to, in the order the pool emits them."""
    timeline: Sequence[tuple[float, float]] | None = None
    """Timed: each record's measured (first token, end) times in ms, on the clock of its
    `timestamp_ms`: the replay follows a run's own timeline instead of the TTFT model's."""
    keys: dict[int, Sequence] | None = None
    """A dict each admitted record's block keys (`VllmPolicy.block_keys`) are put in, by its
    index: what the pool's events name its blocks by."""


def simulate(
    trace: Trace,
    options: SimulationOptions,
    progress: Callable[[int], None] | None = None,
    keep_requests: bool = False,
    check_every: int = 0,
    watched: Watched | None = None,
) -> ReplayReport:
    """Replay `trace` under `options`; `progress(n)` is called every 1,000 requests."""
    return _simulate(trace, options, progress, keep_requests, check_every, watched or Watched())


def _simulate(
    trace: Trace,
    options: SimulationOptions,
    progress: Callable[[int], None] | None,
    keep_requests: bool,
    check_every: int,
    watched: Watched,
) -> ReplayReport:
    events, timeline = watched.events, watched.timeline
    assert timeline is None or (
        options.concurrency == "timed" and len(timeline) == len(trace.records)
    )
    explain = options.explain_misses and options.policy == "vllm"
    policy, block_size = _make_policy(
        trace, options, explain or events is not None or watched.keys is not None
    )
    ledger = MissLedger(detail=keep_requests) if explain else None
    recording = explain or events is not None or watched.keys is not None
    fast = not keep_requests and not check_every and not recording
    if options.concurrency == "serial" and fast:
        return _simulate_serial(trace, options, policy, block_size, progress)
    model = options.ttft
    overhead, per_token, per_pair = model.overhead_ms, model.ms_per_token, model.ms_per_pair
    decode_ms_per_token = 1000.0 / options.decode_tokens_per_s
    timed = options.concurrency == "timed"
    serve = policy.serve
    running: list[tuple[float, int, Admission, int]] = []
    prefilling: list[tuple[float, int, Admission]] = []  # deferred blocks, by prefill end
    slots = PrefillSlots(options.prefill_slots)
    logical_blocks = peak_shared = 0  # block-table entries of running requests
    referenced = getattr(policy, "referenced_blocks", None)
    outcomes: list[RequestOutcome] = []
    query_tokens = hit_tokens = hit_requests = 0
    ttfts: list[float] = []
    ttfts_cold: list[float] = []
    missed: list = []
    observed = None
    for position, record in enumerate(trace.records):
        now = start = record.timestamp_ms
        reasons = None
        try:
            if timed:
                publish_prefilled(prefilling, now)
                logical_blocks -= release_finished(policy, running, now)
                admission, start, freed = admit_waiting(
                    policy, running, record, slots.begin(now), block_size, prefilling
                )
                logical_blocks -= freed
                cached, hit_blocks = admission.cached_tokens, admission.hit_blocks
            elif recording:  # admitted, watched, then released: nothing else holds blocks
                admission = policy.admit(record, now)
                if admission is None:
                    raise CapacityTooSmall(cdiv(record.input_length, block_size))
                cached, hit_blocks = admission.cached_tokens, admission.hit_blocks
            else:  # admitted and released at once: nothing else holds blocks
                served = serve(record, now)
                if served is None:
                    raise CapacityTooSmall(cdiv(record.input_length, block_size))
                cached, hit_blocks = served
        except CapacityTooSmall as failure:
            raise _capacity_error(trace, options, record, position, failure, block_size) from None
        if recording:
            if watched.keys is not None:
                watched.keys[record.index] = policy.block_keys(record, admission)
            reasons = watch_admission(policy, ledger, record, admission, block_size, events)
            if reasons is not None:
                missed.append(reasons)
            if not timed:
                policy.release(admission)
        # TtftModel.predict, inlined: this loop runs once per request of traces of millions
        num_tokens = record.input_length
        cold_pairs = num_tokens * (num_tokens + 1) // 2
        cold = overhead + per_token * num_tokens + per_pair * cold_pairs
        prefill = cold - per_token * cached - per_pair * (cached * (cached + 1) // 2)
        finished = None
        if timeline is not None:  # the run's own: its first token ends its prefill
            first_token, finished = timeline[position]
            prefill = max(first_token - start, 0.0)
        ttft = (start - now) + prefill  # queueing for room in the cache, then prefill
        if timed:
            finish = start + prefill + record.output_length * decode_ms_per_token
            if finished is not None:
                finish = max(finished, start + prefill)
            table = cdiv(record.input_length, block_size)
            heapq.heappush(running, (finish, position, admission, table))
            slots.occupy(start + prefill)
            if admission.unpublished is not None:
                heapq.heappush(prefilling, (start + prefill, position, admission))
            logical_blocks += table
            if referenced is not None:
                peak_shared = max(peak_shared, logical_blocks - referenced())
        query_tokens += num_tokens
        hit_tokens += cached
        if hit_blocks:
            hit_requests += 1
        ttfts.append(ttft)
        ttfts_cold.append(cold)
        if record.observed_cached_tokens is not None:
            observed = (observed or 0) + record.observed_cached_tokens
        if keep_requests:
            outcomes.append(
                RequestOutcome(
                    record.index,
                    record.line,
                    record.timestamp_ms,
                    record.input_length,
                    cached,
                    round(ttft, 3),
                    round(cold, 3),
                    start,
                    record.observed_cached_tokens,
                    miss_reasons=reasons,
                )
            )
        if check_every and position % check_every == 0:
            policy.check_integrity()
        if progress is not None and position % 1000 == 999:
            progress(1000)
    while running:
        policy.release(heapq.heappop(running)[2])
    if events is not None:
        events.extend(policy.take_events())
    if check_every:
        policy.check_integrity()
    report = _report(
        trace,
        options,
        policy,
        block_size,
        query_tokens,
        hit_tokens,
        hit_requests,
        Counter(ttfts),
        Counter(ttfts_cold),
        observed,
        outcomes,
        peak_shared,
    )
    if ledger is not None:
        report.miss_reasons = summed(missed)
    return report


def watch_admission(
    policy: VllmPolicy,
    ledger: MissLedger | None,
    record: TraceRecord,
    admission: Admission,
    block_size: int,
    events: list[tuple] | None = None,
) -> MissReasons | None:
    """What an admission did to the pool: its events appended to `events`, and the reasons
    of its missed tokens from `ledger` (None without one)."""
    drained = policy.take_events()
    if events is not None:
        events.extend(drained)
    if ledger is None:
        return None
    return ledger.admitted(
        record.index,
        policy.block_keys(record, admission),
        record.input_length,
        block_size,
        admission.hit_blocks,
        admission.cached_tokens,
        policy.cacheable_blocks(record),
        drained,
        admission,
    )


def _capacity_error(
    trace: Trace,
    options: SimulationOptions,
    record: TraceRecord,
    position: int,
    failure: CapacityTooSmall,
    block_size: int,
) -> UsageError:
    where = f"line {record.line}" if record.line is not None else f"request {position}"
    capacity = options.cache_blocks
    return UsageError(
        f"{trace.source}: a capacity of {capacity} block{'' if capacity == 1 else 's'}"
        f" cannot hold the request at {where}"
        f" ({record.input_length} tokens need {failure.needed_blocks} blocks of"
        f" {block_size}); raise --cache-blocks / --cache-gb"
    )


def ttft_counts(
    model: TtftModel, pairs: Counter[tuple[int, int]]
) -> tuple[Counter[float], Counter[float]]:
    """TTFTs (no queueing) and cold TTFTs of requests counted by (prompt tokens, cached
    tokens): the same expressions as `_simulate`'s, so that both give the same floats, computed
    once for each distinct pair."""
    overhead, per_token, per_pair = model.overhead_ms, model.ms_per_token, model.ms_per_pair
    ttfts: Counter[float] = Counter()
    ttfts_cold: Counter[float] = Counter()
    for (num_tokens, hit), count in pairs.items():
        cold = overhead + per_token * num_tokens + per_pair * (num_tokens * (num_tokens + 1) // 2)
        ttfts_cold[cold] += count
        ttfts[cold - per_token * hit - per_pair * (hit * (hit + 1) // 2)] += count
    return ttfts, ttfts_cold


def _simulate_serial(
    trace: Trace,
    options: SimulationOptions,
    policy,
    block_size: int,
    progress: Callable[[int], None] | None,
) -> ReplayReport:
    """`_simulate` for serial replays without per-request rows: each batch of 1,000 requests
    is served in one call (`serve_all`), and the TTFTs are computed after the replay."""
    records = trace.records
    cached: list[int] = []
    hit_requests = 0
    for start in range(0, len(records), 1000):
        batch = records[start : start + 1000]
        try:
            hit_requests += policy.serve_all(batch, cached)
        except CapacityTooSmall as failure:
            position = start + (failure.position or 0)
            record = records[position]
            raise _capacity_error(trace, options, record, position, failure, block_size) from None
        if progress is not None and len(batch) == 1000:
            progress(1000)
    lengths = [record.input_length for record in records]
    ttfts, ttfts_cold = ttft_counts(options.ttft, Counter(zip(lengths, cached, strict=True)))
    return _report(
        trace,
        options,
        policy,
        block_size,
        sum(lengths),
        sum(cached),
        hit_requests,
        ttfts,
        ttfts_cold,
        observed_cached_total(records),
        [],
    )


def observed_cached_total(records: list[TraceRecord]) -> int | None:
    """The cached tokens the log's usage reported, summed over the records that carry it;
    None when none does."""
    observations = [
        record.observed_cached_tokens
        for record in records
        if record.observed_cached_tokens is not None
    ]
    return sum(observations) if observations else None


def _report(
    trace,
    options,
    policy,
    block_size,
    query_tokens,
    hit_tokens,
    hit_requests,
    ttfts,
    ttfts_cold,
    observed,
    outcomes,
    peak_shared_blocks=0,
    num_requests: int | None = None,
) -> ReplayReport:
    """The report of a replay (`num_requests`: of a trace streamed, whose records are gone)."""
    if num_requests is None:
        num_requests = len(trace.records)
    bill = None
    if isinstance(policy, ProviderPolicy):
        profile = policy.profile
        price = profile.input_price_per_mtok / 1e6
        without = query_tokens * price
        with_cache = (
            hit_tokens * profile.cached_read_multiplier
            + (query_tokens - hit_tokens) * profile.cache_write_multiplier
        ) * price
        bill = Bill(
            profile.input_price_per_mtok,
            profile.cached_read_multiplier,
            profile.cache_write_multiplier,
            round(without, 6),
            round(with_cache, 6),
            round(1 - with_cache / without, 6) if without else 0.0,
            policy.models.as_dict(),
        )
    capacity = options.cache_blocks if options.policy in ENGINE_POLICIES else None
    return ReplayReport(
        source=trace.source,
        trace_format=trace.format,
        policy=options.policy,
        concurrency=options.concurrency,
        block_size=block_size,
        capacity_blocks=capacity,
        requests=num_requests,
        query_tokens=query_tokens,
        hit_tokens=hit_tokens,
        token_hit_rate=hit_tokens / query_tokens if query_tokens else 0.0,
        request_hit_rate=hit_requests / num_requests if num_requests else 0.0,
        hit_requests=hit_requests,
        evicted_blocks=policy.evicted_blocks,
        peak_used_blocks=policy.peak_used_blocks,
        kv_bytes_per_token=options.kv_bytes_per_token,
        kv_bytes_saved=peak_shared_blocks * block_size * options.kv_bytes_per_token,
        peak_shared_blocks=peak_shared_blocks,
        prefill_kv_bytes_reused=hit_tokens * options.kv_bytes_per_token,
        prefill_tokens_saved=hit_tokens,
        skipped_lines=trace.num_skipped,
        reordered=trace.reordered,
        ttft_ms=distribution(ttfts),
        ttft_uncached_ms=distribution(ttfts_cold),
        bill=bill,
        observed_cached_tokens=observed,
        ttft_model=options.ttft,
        calibration=options.calibration,
        per_request=outcomes,
    )


def min_capacity_blocks(trace: Trace, block_size: int) -> int:
    """The smallest cache that holds the largest request (blocks)."""
    if trace.block_size is not None:
        return max(len(r.hash_ids or ()) for r in trace.records)
    return max(cdiv(r.input_length, block_size) for r in trace.records)


def sweep_capacities(
    trace: Trace, options: SimulationOptions, points: int = 8, unlimited_peak: int | None = None
) -> list[int]:
    """Capacities from the smallest feasible to the unlimited footprint, geometric steps
    (`unlimited_peak`: the blocks an unlimited vllm cache uses, if known)."""
    block_size = trace.block_size or options.block_size
    low = max(min_capacity_blocks(trace, block_size), 1)
    if unlimited_peak is None:
        from dataclasses import replace

        unlimited = simulate(trace, replace(options, cache_blocks=None, policy="vllm"))
        unlimited_peak = unlimited.peak_used_blocks
    high = max(unlimited_peak, low)
    if high == low or points < 2:
        return [low]
    ratio = (high / low) ** (1 / (points - 1))
    values = sorted({max(low, min(high, round(low * ratio**step))) for step in range(points)})
    return values
