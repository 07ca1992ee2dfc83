"""`pcache replay` as one function: the driver of the options' mode, and its report(s).

Drivers: `simulate` (`pcache.replayer.simulate.driver`, the block pool without a model), `engine`
(`pcache.replayer.engine.driver`, the built-in engine, cache on and off) and `endpoint`
(`pcache.replayer.endpoint.driver`, a live server over HTTP). Each has its own options class
(`pcache.replayer.options`); a driver is a function (trace, options, progress) -> ReplayResult
that reads the trace with `options.read_trace`, and a measuring driver fills
`ReplayReport.measurement` or, for a live server, `ReplayReport.endpoint`. A new driver is
its options class and one more entry in `_DRIVERS`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from pcache.cache.capacity import blocks_for_gigabytes, resolve_model
from pcache.errors import OptionError, UsageError
from pcache.options.declared import Declared
from pcache.replayer.endpoint.options import EndpointOptions
from pcache.replayer.engine.options import EngineOptions
from pcache.replayer.options import ReplayOptions, build_options, declared_fields
from pcache.replayer.report import MODES, ReplayReport
from pcache.replayer.simulate.driver import MAX_CACHE_BLOCKS, SimulationOptions, simulate
from pcache.replayer.simulate.options import SimulateOptions
from pcache.replayer.simulate.stream import simulate_file, streams

Progress = Callable[[int], None] | None
Source = str | tuple[Any, ...]
"""What a driver replays: a trace file's path, or request bodies in arrival order."""


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


def replay_options(mode: str = "simulate", base: ReplayOptions | None = None, **given: Any):
    """The options of driver `mode` from loose values (`build_options`), over `base`'s."""
    driver = _DRIVERS.get(mode)
    if driver is None:
        raise OptionError(
            "mode", f"must be one of {', '.join(_DRIVERS)}, got {mode!r}", flag="replay mode"
        )
    drivers = [entry.options for entry in _DRIVERS.values()]
    return build_options(driver.options, drivers, given, base)


def driver_options() -> dict[str, type[ReplayOptions]]:
    """Each replay mode's options class."""
    return {mode: driver.options for mode, driver in _DRIVERS.items()}


def declared_options() -> dict[str, Declared]:
    """Every driver's declared options by field, in the drivers' order: one declaration per
    field, whichever drivers have it."""
    declared: dict[str, Declared] = {}
    for driver in _DRIVERS.values():
        for name, item in declared_fields(driver.options).items():
            assert declared.setdefault(name, item) is item, f"{name} is declared twice"
    return declared


def run_replay(trace: Source, options: ReplayOptions, progress: Progress = None) -> ReplayResult:
    """Replay `trace` with the driver whose options `options` are."""
    driver = _DRIVERS.get(options.mode)
    if driver is None or not isinstance(options, driver.options):
        raise UsageError(f"not the options of a replay driver: {type(options).__name__}")
    return driver.run(trace, options, progress)


def _run_simulation(trace: Source, options: SimulateOptions, progress: Progress) -> ReplayResult:
    shape = resolve_model(options.model)
    used = None
    if options.calibration is not None:
        from pcache.replayer.calibration import read_calibration

        fit, used = read_calibration(options.calibration, options.model)
        options = replace(options, calibration=None, ttft=fit.model)
    simulation = options.simulation_options(shape.kv_bytes_per_token)
    simulation = replace(simulation, calibration=used)
    streamable = options.fleet is None and not (isinstance(trace, str) and os.path.isdir(trace))
    if streamable and streams(trace, simulation, options.keep_requests, options.capacity_sweep):

        def sized(block_size: int) -> SimulationOptions:
            if options.cache_gb is None:
                return simulation
            capacity = blocks_for_gigabytes(options.cache_gb, shape, block_size)
            return replace(simulation, cache_blocks=min(max(capacity, 1), MAX_CACHE_BLOCKS))

        streamed = simulate_file(
            trace,
            sized,
            trace_format=options.trace_format,
            strict=options.strict,
            block_size=options.trace_block_size,
            limit=options.limit,
            progress=progress,
        )
        if streamed is not None:
            report, header = streamed
            return ReplayResult([report], False, shape.name, header.skipped, header.reordered)
    loaded = options.read_trace(trace)
    if options.limit is not None:
        loaded = replace(loaded, records=loaded.records[: options.limit])
    block_size = loaded.block_size or options.settings.block_size
    if options.cache_gb is not None:
        capacity = blocks_for_gigabytes(options.cache_gb, shape, block_size)
        simulation = replace(simulation, cache_blocks=min(max(capacity, 1), MAX_CACHE_BLOCKS))
    if options.fleet is not None:  # one pool per replica behind a router
        from pcache.replayer.fleet.driver import run_fleet

        simulate_one = None
        if options.settings.executor != "local":  # each replica's pool: a task of its own
            from functools import partial

            from pcache.executors import executor_of
            from pcache.replayer.fleet.split import simulate_fleet_split

            executor = executor_of(options.settings.executor, options.settings.ray_address)
            simulate_one = partial(simulate_fleet_split, executor=executor)
        reports = run_fleet(loaded, simulation, options.fleet, progress, simulate_one)
        sweep = options.fleet.is_grid
        return ReplayResult(reports, sweep, shape.name, loaded.skipped, loaded.reordered)
    if options.capacity_sweep:
        from pcache.replayer.simulate.sweep import capacity_sweep  # numpy: only for sweeps

        reports = capacity_sweep(loaded, simulation, options.sweep_points).reports
    else:
        reports = [simulate(loaded, simulation, progress, keep_requests=options.keep_requests)]
    return ReplayResult(
        reports, options.capacity_sweep, shape.name, loaded.skipped, loaded.reordered
    )


def _run_engine(trace: Source, options: EngineOptions, progress: Progress) -> ReplayResult:
    from pcache.replayer.engine.driver import replay_engine

    report, name, loaded = replay_engine(trace, options, progress)
    return ReplayResult([report], False, name, loaded.skipped, loaded.reordered)


def _run_endpoint(trace: Source, options: EndpointOptions, progress: Progress) -> ReplayResult:
    from pcache.replayer.endpoint.driver import replay_endpoint

    loaded = options.read_trace(trace, keep_requests=True)
    report = replay_endpoint(loaded, options)
    model = report.endpoint.model_id
    return ReplayResult([report], False, model, loaded.skipped, loaded.reordered)


@dataclass(frozen=True, slots=True)
class _Driver:
    options: type[ReplayOptions]
    run: Callable[[Source, Any, Progress], ReplayResult]


_DRIVERS: dict[str, _Driver] = {
    "simulate": _Driver(SimulateOptions, _run_simulation),
    "engine": _Driver(EngineOptions, _run_engine),
    "endpoint": _Driver(EndpointOptions, _run_endpoint),
}
assert set(_DRIVERS) <= set(MODES)
