"""`EngineOptions`: what `pcache replay --engine cpu|gpu` (and `--gpu`) is told."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from pcache.errors import OptionError, UsageError
from pcache.options.declared import option
from pcache.replayer.options import (
    CONCURRENCY,
    DECODE_RATE,
    MAX_OUTPUT_TOKENS,
    MAX_PROMPT_TOKENS,
    MAX_SEED,
    MODEL,
    TIME_SCALE,
    ReplayOptions,
    check_field,
)
from pcache.replayer.simulate.options import check_concurrency

if TYPE_CHECKING:
    from pcache.replayer.simulate.driver import SimulationOptions
    from pcache.replayer.ttft import TtftModel

MAX_REPEAT = 1000
MAX_WARMUP_ROUNDS = 100
MAX_THREADS = 1024


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineOptions(ReplayOptions):
    """The built-in engine, prefix caching on and off: the model, device, timing and runs."""

    mode: ClassVar[str] = "engine"
    flags: ClassVar[tuple[str, ...]] = ("--engine", "--gpu")
    refusals: ClassVar[dict[str, str]] = {
        "policy": "--engine replays with the engine's block pool: --policy vllm only",
        "capacity_sweep": "--capacity-sweep is a --simulate option",
        "cache_gb": "--engine sizes its KV cache with --cache-blocks, not --cache-gb",
        "calibration": "--calibration applies to --simulate (--engine fits its own)",
    }

    model: str | None = option(None, declared=MODEL)
    """A preset (tiny, qwen3-0.6b, llama3-8b, ...) or a checkpoint directory."""
    device: str = option(
        "cpu",
        flags=("--engine",),
        help="Measure through the built-in engine, cache on and off: cpu (fp32, torch) or"
        " gpu (bf16, Triton).",
        panel="engine",
        type=str | None,
    )
    """`cpu` (fp32, torch attention) or `gpu` (bf16, Triton kernels)."""
    concurrency: str = option("serial", declared=CONCURRENCY)
    decode_rate: float = option(50.0, declared=DECODE_RATE)
    """Decode tokens/s per request of the simulated prediction beside the measurement."""
    save_calibration: str | None = option(
        None,
        flags=("--save-calibration",),
        help="--engine: write the TTFT model fitted on the cache-off run (JSON).",
        panel="engine",
    )
    """Write the TTFT model fitted on the cache-off run here (JSON)."""
    repeat: int = option(
        1,
        flags=("--repeat",),
        help="--engine: runs; medians reported.",
        panel="engine",
        command_default=1,
    )
    """Runs; every figure is the median over them."""
    time_scale: float = option(1.0, declared=TIME_SCALE)
    """Timed: multiply the trace's gaps between arrivals."""
    max_output_tokens: int | None = option(None, declared=MAX_OUTPUT_TOKENS)
    max_prompt_tokens: int | None = option(None, declared=MAX_PROMPT_TOKENS)
    warmup_rounds: int = option(
        2,
        flags=("--warmup",),
        help="--engine: warm-up rounds before timing (0: none).",
        panel="engine",
        command_default=2,
    )
    """Rounds of warm-up before anything is timed (0: none)."""
    seed: int = 0
    threads: int | None = option(
        None,
        flags=("--threads",),
        help="--engine: torch threads for the model (default: physical cores).",
        panel="engine",
    )
    """Torch threads for the model (default: the machine's physical cores)."""

    def __post_init__(self) -> None:
        from pcache.engine.config import ENGINES
        from pcache.replayer.arrivals import MAX_TIME_SCALE

        ReplayOptions.__post_init__(self)
        if self.device not in ENGINES:
            raise OptionError("device", f"must be cpu or gpu, got {self.device!r}", flag="--engine")
        if self.model is None:
            raise UsageError(
                "--engine needs --model: a preset (tiny, qwen3-0.6b, llama3-8b, ...) or"
                " a checkpoint directory"
            )
        check_concurrency(self.concurrency)
        check_field(self, "decode_rate", above=0)
        check_field(self, "repeat", minimum=1, maximum=MAX_REPEAT)
        check_field(self, "time_scale", minimum=0, maximum=MAX_TIME_SCALE)
        check_field(self, "max_output_tokens", minimum=1)
        check_field(self, "max_prompt_tokens", minimum=1)
        check_field(self, "warmup_rounds", minimum=0, maximum=MAX_WARMUP_ROUNDS)
        check_field(self, "seed", minimum=0, maximum=MAX_SEED)
        check_field(self, "threads", minimum=1, maximum=MAX_THREADS)
        if self.save_calibration is not None:
            from pcache.files import check_writable

            check_writable(self.save_calibration)

    def check_plot(self) -> None:
        """`--plot` draws the TTFT distributions, cache on and off."""

    def simulation_options(
        self, kv_bytes_per_token: int, capacity: int, ttft: TtftModel
    ) -> SimulationOptions:
        """The simulated prediction beside the measurement: the engine's pool and capacity."""
        from pcache.replayer.simulate.driver import SimulationOptions

        return SimulationOptions(
            policy="vllm",
            cache_blocks=capacity,
            block_size=self.settings.block_size,
            concurrency=self.concurrency,
            decode_tokens_per_s=self.decode_rate,
            ttft=ttft,
            kv_bytes_per_token=kv_bytes_per_token,
            hash_algo=self.settings.hash_algo,
        )
