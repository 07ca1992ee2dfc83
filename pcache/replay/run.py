"""`pcache replay` as one function: pick the driver for `arguments.mode`, return its report(s).

Drivers: `simulate` (`pcache.replay.simulate`, the block pool without a model), `engine`
(`pcache.replay.engine_driver`, the built-in engine, cache on and off) and `endpoint`
(`pcache.replay.endpoint_driver`, a live server over HTTP). A driver is a function
(arguments, progress) -> ReplayResult; it reads the trace with `load_trace`, and a measuring
driver fills `ReplayReport.measurement` or, for a live server, `ReplayReport.endpoint` (and can
run the simulator beside it with `simulation_options`); both are in
`pcache.replay.driver_inputs`, which the drivers import instead of this module. A new driver is
one more entry in `_DRIVERS`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from pcache.cache.capacity import blocks_for_gigabytes, resolve_model
from pcache.errors import UsageError
from pcache.replay.arguments import DEVICES, ReplayArguments
from pcache.replay.driver_inputs import load_trace, simulation_options, trace_settings
from pcache.replay.report import MODES, ReplayReport
from pcache.replay.simulate import MAX_CACHE_BLOCKS, PROVIDER_POLICIES, simulate, sweep_capacities

__all__ = ["ReplayResult", "load_trace", "run_replay", "simulation_options", "trace_settings"]

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
    driver = _DRIVERS.get(arguments.mode)
    if driver is None:
        raise UsageError(
            f"replay mode must be one of {', '.join(_DRIVERS)}, got {arguments.mode!r}"
        )
    if arguments.device not in DEVICES:
        raise UsageError(f"--engine must be cpu or gpu, got {arguments.device!r}")
    return driver(arguments, progress)


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


def _run_endpoint(arguments: ReplayArguments, progress: Progress) -> ReplayResult:
    from pcache.replay.endpoint_driver import replay_endpoint

    assert arguments.endpoint is not None
    trace = load_trace(arguments)
    report = replay_endpoint(trace, arguments.endpoint)
    return ReplayResult([report], False, arguments.endpoint.model, trace.skipped, trace.reordered)


_DRIVERS: dict[str, Callable[[ReplayArguments, Progress], ReplayResult]] = {
    "simulate": _run_simulation,
    "engine": _run_engine,
    "endpoint": _run_endpoint,
}
assert set(_DRIVERS) <= set(MODES)
