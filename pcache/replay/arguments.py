"""`ReplayArguments`: everything `pcache replay` was asked to do, whichever driver runs it."""

from __future__ import annotations

from dataclasses import dataclass, field

from pcache.cache.hashing import DEFAULT_BLOCK_SIZE, DEFAULT_HASH_ALGO
from pcache.models import DEFAULT_MODEL
from pcache.prompt.render import DEFAULT_TOKENIZER
from pcache.prompt.tokenizer import DEFAULT_DATE
from pcache.replay.ttft import TtftModel

DEVICES = ("cpu", "gpu")


@dataclass(frozen=True, slots=True)
class ReplayArguments:
    """What to replay, against what, and how; `mode` picks the driver (`report.MODES`)."""

    trace: str
    mode: str = "simulate"
    device: str = "cpu"
    """Engine mode: `cpu` (fp32, torch attention) or `gpu` (bf16, Triton kernels)."""
    policy: str = "vllm"
    cache_blocks: int | None = None
    cache_gb: float | None = None
    model: str = DEFAULT_MODEL
    concurrency: str = "serial"
    decode_rate: float = 50.0
    ttft: TtftModel = field(default_factory=TtftModel)
    calibration: str | None = None
    """A file written by `--save-calibration`: its fit replaces `ttft`."""
    save_calibration: str | None = None
    capacity_sweep: bool = False
    sweep_points: int = 8
    keep_requests: bool = False
    strict: bool = False
    trace_format: str = "auto"
    trace_block_size: int | None = None
    tokenizer: str = DEFAULT_TOKENIZER
    tokenizer_given: bool = False
    """True when `-t` was given: request traces then use it even if the model has its own."""
    block_size: int = DEFAULT_BLOCK_SIZE
    hash_algo: str = DEFAULT_HASH_ALGO
    cache_salt: str | None = None
    date: str = DEFAULT_DATE
    repeat: int = 1
    time_scale: float = 1.0
    max_output_tokens: int | None = None
    max_prompt_tokens: int | None = None
    limit: int | None = None
    seed: int = 0
