"""`pcache replay` as one function: read the trace, pick the driver, return its report(s).

Drivers: `simulate` (`pcache.replay.simulate`, the block pool without a model) and `engine`
(`pcache.replay.engine_driver`, the built-in engine, cache on and off). Each takes the
arguments and the trace and returns a `ReplayReport`; a new driver is one more entry in
`_DRIVERS`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from pcache.cache.capacity import blocks_for_gigabytes, resolve_model
from pcache.errors import UsageError
from pcache.pipeline import Settings, validate_date
from pcache.replay.arguments import DEVICES, ReplayArguments
from pcache.replay.report import MODES, ReplayReport
from pcache.replay.simulate import (
    MAX_CACHE_BLOCKS,
    PROVIDER_POLICIES,
    SimulationOptions,
    simulate,
    sweep_capacities,
)
from pcache.traces.readers import read_trace
from pcache.traces.record import Trace

Progress = Callable[[int], None] | None


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


def run_replay(arguments: ReplayArguments, progress: Progress = None) -> ReplayResult:
    """Replay `arguments.trace` with the driver `arguments.mode` names."""
    if arguments.mode not in MODES or arguments.mode == "endpoint":
        raise UsageError(f"unknown replay mode {arguments.mode!r}")
    if arguments.device not in DEVICES:
        raise UsageError(f"--engine must be cpu or gpu, got {arguments.device!r}")
    if arguments.mode != "simulate":
        return _run_engine(arguments, progress)
    return _run_simulation(arguments, progress)


def trace_settings(arguments: ReplayArguments) -> Settings:
    return Settings(
        tokenizer=arguments.tokenizer,
        block_size=arguments.block_size,
        hash_algo=arguments.hash_algo,
        cache_salt=arguments.cache_salt,
        date=validate_date(arguments.date),
    )


def load_trace(arguments: ReplayArguments, settings: Settings | None = None) -> Trace:
    return read_trace(
        arguments.trace,
        trace_format=arguments.trace_format,
        strict=arguments.strict,
        settings=settings or trace_settings(arguments),
        block_size=arguments.trace_block_size,
    )


def simulation_options(arguments: ReplayArguments, kv_bytes_per_token: int) -> SimulationOptions:
    return SimulationOptions(
        policy=arguments.policy,
        cache_blocks=arguments.cache_blocks,
        block_size=arguments.block_size,
        concurrency=arguments.concurrency,
        decode_tokens_per_s=arguments.decode_rate,
        ttft=arguments.ttft,
        kv_bytes_per_token=kv_bytes_per_token,
        hash_algo=arguments.hash_algo,
    )


def _run_simulation(arguments: ReplayArguments, progress: Progress) -> ReplayResult:
    if arguments.policy in PROVIDER_POLICIES and (
        arguments.capacity_sweep or arguments.cache_blocks or arguments.cache_gb
    ):
        raise UsageError(
            f"--policy {arguments.policy} models a hosted cache (TTL, no capacity);"
            " --cache-blocks, --cache-gb and --capacity-sweep apply to vllm and radix"
        )
    shape = resolve_model(arguments.model)
    if arguments.calibration is not None:
        from pcache.replay.calibration import load_calibration

        arguments = replace(arguments, ttft=load_calibration(arguments.calibration).model)
    options = simulation_options(arguments, shape.kv_bytes_per_token)
    trace = load_trace(arguments)
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


def _run_engine(arguments: ReplayArguments, progress: Progress) -> ReplayResult:
    if arguments.policy != "vllm":
        raise UsageError("--engine replays with the engine's block pool: --policy vllm only")
    if arguments.capacity_sweep:
        raise UsageError("--capacity-sweep is a --simulate option")
    if arguments.cache_gb is not None:
        raise UsageError("--engine sizes its KV cache with --cache-blocks, not --cache-gb")
    from pcache.replay.engine_driver import replay_engine

    report, name, trace = replay_engine(arguments, progress)
    return ReplayResult([report], False, name, trace.skipped, trace.reordered)
