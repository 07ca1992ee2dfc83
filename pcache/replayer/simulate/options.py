"""`SimulateOptions`: what `pcache replay --simulate` (the default) is told."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

from pcache.defaults import DEFAULT_MODEL
from pcache.errors import OptionError, UsageError
from pcache.options.declared import Declared, option
from pcache.replayer.fleet.options import FleetOptions
from pcache.replayer.options import (
    CONCURRENCY,
    DECODE_RATE,
    MODEL,
    ReplayOptions,
    check_field,
)
from pcache.replayer.ttft import TtftModel

if TYPE_CHECKING:
    from pcache.replayer.simulate.driver import SimulationOptions

MAX_CACHE_GB = 1 << 30
"""An exbibyte of KV cache."""
MAX_SWEEP_POINTS = 1000
TTFT_FLAGS = {
    "overhead_ms": Declared(
        ("--ttft-overhead-ms",), "TTFT fixed overhead (ms; default 55).", "simulate", type=float
    ),
    "ms_per_token": Declared(
        ("--ttft-ms-per-token",),
        "TTFT cost per uncached token (ms; default 0.05).",
        "simulate",
        type=float,
    ),
    "ms_per_pair": Declared(
        ("--ttft-ms-per-pair",),
        "TTFT cost per query-key pair (ms; default 1e-6).",
        "simulate",
        type=float,
    ),
}
"""The flags of the TTFT model's coefficients (`ttft`), by the `TtftModel` field each sets."""


def check_concurrency(concurrency: str) -> None:
    from pcache.replayer.simulate.driver import CONCURRENCY as MODES

    if concurrency not in MODES:
        raise OptionError("concurrency", f"must be serial or timed, got {concurrency!r}")


def ttft_of(coefficients: dict[str, float | None]) -> TtftModel | None:
    """The TTFT model of the coefficients given (the others at their defaults), or None when
    none is (`TTFT_FLAGS`' names)."""
    given = {name: value for name, value in coefficients.items() if value is not None}
    return TtftModel(**given) if given else None


@dataclass(frozen=True, slots=True, kw_only=True)
class SimulateOptions(ReplayOptions):
    """A cache policy replayed without a model: its capacity, timing and TTFT model."""

    mode: ClassVar[str] = "simulate"
    flags: ClassVar[tuple[str, ...]] = ("--simulate",)

    model: str = option(DEFAULT_MODEL, declared=MODEL)
    """The model whose KV bytes per token size the cache and price what it saves."""
    policy: str = option(
        "vllm",
        flags=("--policy",),
        help="vllm (block pool), radix (SGLang), or a provider: openai, anthropic, gemini,"
        " bedrock, deepseek.",
        panel="simulate",
        command_default="vllm",
    )
    """vllm (block pool), radix (SGLang), or a hosted provider's cache (openai, ...)."""
    cache_gb: float | None = option(
        None,
        flags=("--cache-gb",),
        help="Cache capacity in GiB of KV for --model.",
        panel="simulate",
    )
    """The capacity in GiB of `model`'s KV (instead of `cache_blocks`)."""
    concurrency: str = option("serial", declared=CONCURRENCY)
    decode_rate: float = option(50.0, declared=DECODE_RATE)
    """Decode tokens/s per request (timed)."""
    publish_blocks: str | None = option(
        None,
        flags=("--publish-blocks",),
        help="Timed: a request's blocks are hits from its admission (scheduled, vLLM) or"
        " from the end of its prefill (prefilled, SGLang). Default: the --policy's engine.",
        panel="simulate",
    )
    """Timed: a request's blocks are hits from its admission (`scheduled`, vLLM) or from the
    end of its prefill (`prefilled`, SGLang); None: the policy's engine."""
    prefill_slots: int | None = option(
        None,
        flags=("--prefill-slots",),
        help="Timed: at most N prefills at once per engine; the others wait their turn"
        " (default: no limit).",
        panel="simulate",
    )
    """Timed: at most this many prefills at once per engine (None: no limit)."""

    ttft: TtftModel | None = field(default=None, metadata={"flag": "--ttft-*"})
    """The TTFT model's coefficients (None: `TtftModel()`, or the calibration's): `TTFT_FLAGS`."""
    calibration: str | None = option(
        None,
        flags=("--calibration",),
        help="--simulate: the TTFT model fitted by --save-calibration.",
        panel="simulate",
    )
    """A file written by `replay --engine --save-calibration`: its fit is the TTFT model."""
    capacity_sweep: bool = option(
        False,
        flags=("--capacity-sweep",),
        help="Replay at several cache sizes.",
        panel="simulate",
        command_default=False,
    )
    sweep_points: int = option(
        8,
        flags=("--sweep-points",),
        help="Cache sizes in the sweep.",
        panel="simulate",
        command_default=8,
    )
    fleet: FleetOptions | None = field(default=None, metadata={"flag": "--replicas"})
    """`--replicas`, `--router`: one pool per replica behind a router (`replayer.fleet`)."""

    def __post_init__(self) -> None:
        from pcache.replayer.simulate.driver import POLICIES, PROVIDER_POLICIES, PUBLISH_BLOCKS

        ReplayOptions.__post_init__(self)
        if self.policy not in POLICIES:
            choices = ", ".join(POLICIES)
            raise OptionError("policy", f"must be one of {choices}, got {self.policy!r}")
        check_concurrency(self.concurrency)
        check_field(self, "prefill_slots", minimum=1)
        timed_only = (self.publish_blocks, self.prefill_slots)
        if self.concurrency != "timed" and any(value is not None for value in timed_only):
            raise UsageError("--publish-blocks and --prefill-slots apply to --concurrency timed")
        if self.publish_blocks is not None and self.publish_blocks not in PUBLISH_BLOCKS:
            reason = f"must be scheduled or prefilled, got {self.publish_blocks!r}"
            raise OptionError("publish_blocks", reason)
        check_field(self, "decode_rate", above=0)
        check_field(self, "cache_gb", above=0, maximum=MAX_CACHE_GB)
        check_field(self, "sweep_points", minimum=2, maximum=MAX_SWEEP_POINTS)
        self._check_ttft()
        if self.cache_blocks is not None and self.cache_gb is not None:
            raise UsageError("give --cache-blocks or --cache-gb, not both")
        if self.calibration is not None and self.ttft is not None:
            raise UsageError("give --calibration or the --ttft-* coefficients, not both")
        if self.fleet is not None and self.capacity_sweep:
            raise UsageError("give --replicas or --capacity-sweep, not both")
        sized = self.capacity_sweep or self.cache_blocks or self.cache_gb
        if self.policy in PROVIDER_POLICIES and sized:
            raise OptionError(
                "policy",
                f"{self.policy} models a hosted cache (TTL, no capacity);"
                " --cache-blocks, --cache-gb and --capacity-sweep apply to vllm and radix",
            )

    def _check_ttft(self) -> None:
        """Each coefficient of `ttft` at least 0, named by its flag."""
        from pcache.options.numbers import number_problem

        for name, declared in TTFT_FLAGS.items():
            value = getattr(self.ttft, name) if self.ttft is not None else None
            problem = None if value is None else number_problem(value, minimum=0)
            if problem is not None:
                raise OptionError("ttft", problem, flag=declared.flag)

    def check_plot(self) -> None:
        if not self.capacity_sweep and self.fleet is None:
            raise UsageError("--plot needs --capacity-sweep or --replicas (or --engine)")

    def simulation_options(self, kv_bytes_per_token: int) -> SimulationOptions:
        """What the simulator runs with, for a model of `kv_bytes_per_token`."""
        from pcache.replayer.simulate.driver import SimulationOptions

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
            explain_misses=self.policy == "vllm"
            and self.fleet is None
            and not self.capacity_sweep
            and (
                self.concurrency == "timed"
                or self.cache_blocks is not None
                or self.cache_gb is not None
            ),
        )
