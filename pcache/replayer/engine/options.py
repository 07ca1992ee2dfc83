"""`EngineOptions`: what `pcache replay --engine cpu|gpu` (and `--gpu`) is told."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from pcache.engine.config import ENGINES, check_engine
from pcache.errors import UsageError
from pcache.numbers import check_number
from pcache.replayer.arrivals import MAX_TIME_SCALE
from pcache.replayer.options import MAX_SEED, ReplayOptions, check_count
from pcache.replayer.simulate.driver import SimulationOptions
from pcache.replayer.simulate.options import check_concurrency
from pcache.replayer.ttft import TtftModel

DEVICES = ENGINES
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

    model: str | None = None
    """A preset (tiny, qwen3-0.6b, llama3-8b, ...) or a checkpoint directory."""
    device: str = field(default="cpu", metadata={"flag": "--engine"})
    """`cpu` (fp32, torch attention) or `gpu` (bf16, Triton kernels)."""
    concurrency: str = "serial"
    decode_rate: float = 50.0
    """Decode tokens/s per request of the simulated prediction beside the measurement."""
    save_calibration: str | None = None
    """Write the TTFT model fitted on the cache-off run here (JSON)."""
    repeat: int = 1
    """Runs; every figure is the median over them."""
    time_scale: float = 1.0
    """Timed: multiply the trace's gaps between arrivals."""
    max_output_tokens: int | None = None
    max_prompt_tokens: int | None = None
    warmup_rounds: int = field(default=2, metadata={"flag": "--warmup"})
    """Rounds of warm-up before anything is timed (0: none)."""
    seed: int = 0
    threads: int | None = None
    """Torch threads for the model (default: the machine's physical cores)."""

    def __post_init__(self) -> None:
        ReplayOptions.__post_init__(self)
        check_engine(self.device)
        if self.model is None:
            raise UsageError(
                "--engine needs --model: a preset (tiny, qwen3-0.6b, llama3-8b, ...) or"
                " a checkpoint directory"
            )
        check_concurrency(self.concurrency)
        check_number("--decode-rate", self.decode_rate, above=0)
        check_number("--repeat", self.repeat, minimum=1, maximum=MAX_REPEAT)
        check_number("--time-scale", self.time_scale, minimum=0, maximum=MAX_TIME_SCALE)
        check_count("--max-output-tokens", self.max_output_tokens, 1)
        check_count("--max-prompt-tokens", self.max_prompt_tokens, 1)
        check_number("--warmup", self.warmup_rounds, minimum=0, maximum=MAX_WARMUP_ROUNDS)
        check_number("--seed", self.seed, minimum=0, maximum=MAX_SEED)
        if self.threads is not None:
            check_number("--threads", self.threads, minimum=1, maximum=MAX_THREADS)
        if self.save_calibration is not None:
            from pcache.files import check_writable

            check_writable(self.save_calibration)

    def check_plot(self) -> None:
        """`--plot` draws the TTFT distributions, cache on and off."""

    def simulation_options(
        self, kv_bytes_per_token: int, capacity: int, ttft: TtftModel
    ) -> SimulationOptions:
        """The simulated prediction beside the measurement: the engine's pool and capacity."""
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
