"""What the replay drivers derive from `ReplayArguments`: the trace's settings, the trace, and
the simulator's options (a measuring driver runs the simulator beside its measurement)."""

from __future__ import annotations

from pcache.pipeline import Settings, validate_date
from pcache.replay.arguments import ReplayArguments
from pcache.replay.simulate import SimulationOptions
from pcache.traces.readers import read_trace
from pcache.traces.record import Trace


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
