"""`EndpointOptions`: how `pcache replay --endpoint` talks to a live server."""

from __future__ import annotations

from dataclasses import dataclass

from pcache.errors import UsageError
from pcache.replay.endpoint_client import APIS


@dataclass(frozen=True, slots=True)
class EndpointOptions:
    """How to replay against a server (the trace itself is read by the caller)."""

    url: str
    model: str
    api: str = "completions"
    max_concurrency: int | None = None
    rate: float | None = None
    burstiness: float = 1.0
    time_scale: float = 1.0
    compare_cache: bool = False
    reset_cache: bool = False
    api_key_env: str | None = None
    timeout_s: float = 300.0
    retries: int = 2
    ignore_eos: bool = False
    max_output_tokens: int | None = None
    max_prompt_tokens: int | None = None
    limit: int | None = None
    vocab_size: int | None = None
    block_size: int = 16
    cache_blocks: int | None = None
    hash_algo: str = "pcache"
    tokenizer: str = "gpt-oss"
    seed: int = 0
    scrape_metrics: bool = True

    def __post_init__(self) -> None:
        if self.api not in APIS:
            raise UsageError(f"--api must be one of {', '.join(APIS)}, got {self.api!r}")
        if not self.url.startswith(("http://", "https://")):
            raise UsageError(f"--endpoint must be an http:// or https:// URL, got {self.url!r}")
        if self.max_concurrency is not None and self.max_concurrency < 1:
            raise UsageError("--max-concurrency must be at least 1")
        if not self.timeout_s > 0:
            raise UsageError("--timeout must be positive")
        if self.retries < 0:
            raise UsageError("--retries must be zero or more")
        if self.vocab_size is not None and self.vocab_size < 2:
            raise UsageError("--vocab-size must be at least 2")

    @property
    def base(self) -> str:
        return self.url.rstrip("/")

    @property
    def root(self) -> str:
        """The server's root (for /metrics and cache resets): the URL without its /v1."""
        return self.base.removesuffix("/v1")

    @property
    def backend(self) -> str:
        return {"completions": "openai", "chat": "openai-chat", "anthropic": "anthropic"}[self.api]
