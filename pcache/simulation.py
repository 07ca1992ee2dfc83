"""`pcache replay --simulate` as one function: read the trace, size the cache, replay."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from pcache.cache.capacity import DEFAULT_MODEL, blocks_for_gigabytes, resolve_model
from pcache.cache.hashing import DEFAULT_BLOCK_SIZE, DEFAULT_HASH_ALGO
from pcache.cache.simulate import (
    MAX_CACHE_BLOCKS,
    PROVIDER_POLICIES,
    ReplayReport,
    SimulationOptions,
    simulate,
    sweep_capacities,
)
from pcache.cache.ttft import TtftModel
from pcache.errors import UsageError
from pcache.pipeline import Settings, validate_date
from pcache.prompt.render import DEFAULT_TOKENIZER
from pcache.prompt.tokenizer import DEFAULT_DATE
from pcache.traces.readers import read_trace


@dataclass(frozen=True, slots=True)
class ReplayArguments:
    """Everything the replay command was asked to do."""

    trace: str
    policy: str = "vllm"
    cache_blocks: int | None = None
    cache_gb: float | None = None
    model: str = DEFAULT_MODEL
    concurrency: str = "serial"
    decode_rate: float = 50.0
    ttft: tuple[float, float, float] = (55.0, 0.05, 1e-6)
    capacity_sweep: bool = False
    sweep_points: int = 8
    keep_requests: bool = False
    strict: bool = False
    trace_format: str = "auto"
    trace_block_size: int | None = None
    tokenizer: str = DEFAULT_TOKENIZER
    block_size: int = DEFAULT_BLOCK_SIZE
    hash_algo: str = DEFAULT_HASH_ALGO
    cache_salt: str | None = None
    date: str = DEFAULT_DATE


@dataclass(slots=True)
class ReplayResult:
    """One report (or one per capacity of a sweep) and what reading the trace noticed."""

    reports: list[ReplayReport]
    sweep: bool
    model: str
    skipped: list[str] = field(default_factory=list)
    reordered: bool = False

    def to_dict(self) -> dict:
        if self.sweep:
            return {"model": self.model, "sweep": [report.to_dict() for report in self.reports]}
        return {"model": self.model, **self.reports[0].to_dict()}


def run_replay(
    arguments: ReplayArguments, progress: Callable[[int], None] | None = None
) -> ReplayResult:
    if arguments.policy in PROVIDER_POLICIES and (
        arguments.capacity_sweep or arguments.cache_blocks or arguments.cache_gb
    ):
        raise UsageError(
            f"--policy {arguments.policy} models a hosted cache (TTL, no capacity);"
            " --cache-blocks, --cache-gb and --capacity-sweep apply to vllm and radix"
        )
    shape = resolve_model(arguments.model)
    settings = Settings(
        tokenizer=arguments.tokenizer,
        block_size=arguments.block_size,
        hash_algo=arguments.hash_algo,
        cache_salt=arguments.cache_salt,
        date=validate_date(arguments.date),
    )
    options = SimulationOptions(
        policy=arguments.policy,
        cache_blocks=arguments.cache_blocks,
        block_size=arguments.block_size,
        concurrency=arguments.concurrency,
        decode_tokens_per_s=arguments.decode_rate,
        ttft=TtftModel(*arguments.ttft),
        kv_bytes_per_token=shape.kv_bytes_per_token,
        hash_algo=arguments.hash_algo,
    )
    trace = read_trace(
        arguments.trace,
        trace_format=arguments.trace_format,
        strict=arguments.strict,
        settings=settings,
        block_size=arguments.trace_block_size,
    )
    block_size = trace.block_size or arguments.block_size
    if arguments.cache_gb is not None:
        options = replace(
            options,
            cache_blocks=min(
                max(blocks_for_gigabytes(arguments.cache_gb, shape, block_size), 1),
                MAX_CACHE_BLOCKS,
            ),
        )
    if arguments.capacity_sweep:
        capacities = sweep_capacities(trace, options, arguments.sweep_points)
        reports = [
            simulate(trace, replace(options, cache_blocks=capacity), progress=progress)
            for capacity in capacities
        ]
    else:
        reports = [simulate(trace, options, progress, keep_requests=arguments.keep_requests)]
    return ReplayResult(
        reports, arguments.capacity_sweep, shape.name, trace.skipped, trace.reordered
    )
