"""EngineConfig: every knob of the engine in one object, checked once."""

from __future__ import annotations

from dataclasses import dataclass

from pcache.defaults import DEFAULT_BLOCK_SIZE, DEFAULT_HASH_ALGO
from pcache.errors import UsageError

ENGINES = ("cpu", "gpu")
"""`--engine` choices: cpu (fp32, torch attention) or gpu (bf16, Triton kernels, on CUDA)."""
DTYPES = ("auto", "float32", "bfloat16", "float16")
BACKENDS = ("auto", "torch", "triton")


def check_engine(engine: str) -> None:
    if engine not in ENGINES:
        raise UsageError(f"--engine must be cpu or gpu, got {engine!r}")


def torch_device(engine: str) -> str:
    """The torch device an `--engine` choice runs on: `gpu` is `cuda`, `cpu` the CPU."""
    check_engine(engine)
    return "cuda" if engine == "gpu" else "cpu"


@dataclass(slots=True)
class EngineConfig:
    """What to run (a preset name or a checkpoint directory) and how."""

    model: str = "tiny"
    device: str = "cpu"
    dtype: str = "auto"
    attention_backend: str = "auto"
    block_size: int = DEFAULT_BLOCK_SIZE
    num_kv_blocks: int | None = None
    kv_cache_tokens: int | None = None
    gpu_memory_utilization: float = 0.9
    max_num_batched_tokens: int = 8192
    max_num_seqs: int = 256
    max_model_len: int | None = None
    enable_prefix_caching: bool = True
    hash_algo: str = DEFAULT_HASH_ALGO
    seed: int = 0
    record_logits: bool = False

    def __post_init__(self) -> None:
        assert self.block_size >= 1 and self.block_size & (self.block_size - 1) == 0, (
            "block_size must be a power of two"
        )
        assert self.dtype in DTYPES, self.dtype
        assert self.attention_backend in BACKENDS, self.attention_backend
        assert self.device.split(":")[0] in ("cpu", "cuda"), self.device
        assert self.max_num_batched_tokens >= 1 and self.max_num_seqs >= 1
        assert self.num_kv_blocks is None or self.num_kv_blocks >= 2
        assert self.kv_cache_tokens is None or self.kv_cache_tokens >= self.block_size
        assert 0.0 < self.gpu_memory_utilization <= 1.0
        if self.device == "cpu":
            assert self.dtype != "float16", "no float16 on the CPU (no native fp16 GEMM)"

    @property
    def is_cuda(self) -> bool:
        return self.device.startswith("cuda")

    @property
    def torch_dtype_name(self) -> str:
        if self.dtype != "auto":
            return self.dtype
        return "bfloat16" if self.is_cuda else "float32"

    @property
    def backend_name(self) -> str:
        if self.attention_backend != "auto":
            return self.attention_backend
        return "triton" if self.is_cuda else "torch"
