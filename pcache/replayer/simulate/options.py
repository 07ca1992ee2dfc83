"""`SimulateOptions`: what `pcache replay --simulate` (the default) is told."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from pcache.defaults import DEFAULT_MODEL
from pcache.errors import UsageError
from pcache.numbers import check_number
from pcache.replayer.fleet.options import FleetOptions
from pcache.replayer.options import ReplayOptions
from pcache.replayer.simulate.driver import (
    CONCURRENCY,
    POLICIES,
    PROVIDER_POLICIES,
    PUBLISH_BLOCKS,
    SimulationOptions,
)
from pcache.replayer.ttft import TtftModel

MAX_CACHE_GB = 1 << 30
"""An exbibyte of KV cache."""
MAX_SWEEP_POINTS = 1000


def check_concurrency(concurrency: str) -> None:
    if concurrency not in CONCURRENCY:
        raise UsageError(f"--concurrency must be serial or timed, got {concurrency!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class SimulateOptions(ReplayOptions):
    """A cache policy replayed without a model: its capacity, timing and TTFT model."""

    mode: ClassVar[str] = "simulate"
    flags: ClassVar[tuple[str, ...]] = ("--simulate",)

    policy: str = "vllm"
    """vllm (block pool), radix (SGLang), or a hosted provider's cache (openai, ...)."""
    cache_gb: float | None = None
    """The capacity in GiB of `model`'s KV (instead of `cache_blocks`)."""
    model: str = DEFAULT_MODEL
    """The model whose KV bytes per token size the cache and price what it saves."""
    concurrency: str = "serial"
    decode_rate: float = 50.0
    """Decode tokens/s per request (timed)."""
    ttft: TtftModel | None = field(default=None, metadata={"flag": "--ttft-*"})
    """The TTFT model's coefficients (None: `TtftModel()`, or the calibration's)."""
    calibration: str | None = None
    """A file written by `replay --engine --save-calibration`: its fit is the TTFT model."""
    capacity_sweep: bool = False
    sweep_points: int = 8
    fleet: FleetOptions | None = field(default=None, metadata={"flag": "--replicas"})
    """`--replicas`, `--router`: one pool per replica behind a router (`replayer.fleet`)."""
    publish_blocks: str | None = None
    """Timed: a request's blocks are hits from its admission (`scheduled`, vLLM) or from the
    end of its prefill (`prefilled`, SGLang); None: the policy's engine."""
    prefill_slots: int | None = None
    """Timed: at most this many prefills at once per engine (None: no limit)."""

    def __post_init__(self) -> None:
        ReplayOptions.__post_init__(self)
        if self.policy not in POLICIES:
            raise UsageError(f"--policy must be one of {', '.join(POLICIES)}, got {self.policy!r}")
        check_concurrency(self.concurrency)
        if self.prefill_slots is not None:
            check_number("--prefill-slots", self.prefill_slots, minimum=1)
        timed_only = (self.publish_blocks, self.prefill_slots)
        if self.concurrency != "timed" and any(value is not None for value in timed_only):
            raise UsageError("--publish-blocks and --prefill-slots apply to --concurrency timed")
        if self.publish_blocks is not None and self.publish_blocks not in PUBLISH_BLOCKS:
            raise UsageError(
                f"--publish-blocks must be scheduled or prefilled, got {self.publish_blocks!r}"
            )
        check_number("--decode-rate", self.decode_rate, above=0)
        if self.cache_gb is not None:
            check_number("--cache-gb", self.cache_gb, above=0, maximum=MAX_CACHE_GB)
        check_number("--sweep-points", self.sweep_points, minimum=2, maximum=MAX_SWEEP_POINTS)
        if self.ttft is not None:
            check_number("--ttft-overhead-ms", self.ttft.overhead_ms, minimum=0)
            check_number("--ttft-ms-per-token", self.ttft.ms_per_token, minimum=0)
            check_number("--ttft-ms-per-pair", self.ttft.ms_per_pair, minimum=0)
        if self.cache_blocks is not None and self.cache_gb is not None:
            raise UsageError("give --cache-blocks or --cache-gb, not both")
        if self.calibration is not None and self.ttft is not None:
            raise UsageError("give --calibration or the --ttft-* coefficients, not both")
        if self.fleet is not None and self.capacity_sweep:
            raise UsageError("give --replicas or --capacity-sweep, not both")
        sized = self.capacity_sweep or self.cache_blocks or self.cache_gb
        if self.policy in PROVIDER_POLICIES and sized:
            raise UsageError(
                f"--policy {self.policy} models a hosted cache (TTL, no capacity);"
                " --cache-blocks, --cache-gb and --capacity-sweep apply to vllm and radix"
            )

    def check_plot(self) -> None:
        if not self.capacity_sweep and self.fleet is None:
            raise UsageError("--plot needs --capacity-sweep or --replicas (or --engine)")

    def simulation_options(self, kv_bytes_per_token: int) -> SimulationOptions:
        """What the simulator runs with, for a model of `kv_bytes_per_token`."""
        return SimulationOptions(
            policy=self.policy,
            cache_blocks=self.cache_blocks,
            block_size=self.settings.block_size,
            concurrency=self.concurrency,
            decode_tokens_per_s=self.decode_rate,
            ttft=self.ttft or TtftModel(),
            kv_bytes_per_token=kv_bytes_per_token,
            hash_algo=self.settings.hash_algo,
            publish_blocks=self.publish_blocks,
            prefill_slots=self.prefill_slots,
        )
