"""`EndpointOptions`: what `pcache replay --endpoint URL` is told: the server, arrivals, passes."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from pcache.errors import UsageError
from pcache.numbers import check_number
from pcache.replayer.arrivals import MAX_TIME_SCALE
from pcache.replayer.endpoint_client import APIS
from pcache.replayer.options import MAX_SEED, ReplayOptions, check_count

MIN_RATE = 1e-3
"""Fewest requests per second (one every 1,000 s): a slower rate never ends a replay."""
MIN_BURSTINESS = 1e-2
"""Smallest gamma shape: smaller ones draw gaps of years between arrivals."""
MAX_RETRIES = 100
"""More retries of a refused connection only make a replay against a dead server hang."""
MAX_VOCAB_SIZE = 1 << 32
"""Token ids are drawn below `vocab_size` as 64-bit integers; no vocabulary comes near this."""


def _check_url(url: str) -> None:
    """An http(s) URL with a host and a valid port, or a `UsageError` quoting it."""
    import httpx

    problem = None
    if not url.startswith(("http://", "https://")):
        problem = "must be an http:// or https:// URL"
    else:
        try:
            parsed = httpx.URL(url)
        except httpx.InvalidURL as error:
            problem = f"is not a valid URL ({error})"
        else:
            if not parsed.host:
                problem = "has no host"
            elif parsed.port is not None and not 0 < parsed.port < 65536:
                problem = f"has port {parsed.port}, outside 1-65535"
    if problem is not None:
        raise UsageError(f"--endpoint {problem}, got {url!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class EndpointOptions(ReplayOptions):
    """How to replay against a server: its URL and API, arrivals, concurrency and passes."""

    mode: ClassVar[str] = "endpoint"
    flags: ClassVar[tuple[str, ...]] = ("--endpoint",)
    refusals: ClassVar[dict[str, str]] = {
        "policy": "--endpoint predicts with the vLLM block pool: --policy vllm only"
    }

    url: str = field(default="", metadata={"flag": "--endpoint"})
    model: str = ""
    """The served model's name ("": the one the server lists at /v1/models)."""
    api: str = "completions"
    max_concurrency: int | None = None
    rate: float | None = None
    burstiness: float = 1.0
    time_scale: float = 1.0
    compare_cache: bool = False
    reset_cache: bool = False
    api_key_env: str | None = None
    timeout_s: float = field(default=300.0, metadata={"flag": "--timeout"})
    retries: int = 2
    ignore_eos: bool = False
    max_output_tokens: int | None = None
    max_prompt_tokens: int | None = None
    vocab_size: int | None = None
    seed: int = 0
    scrape_metrics: bool = field(default=True, metadata={"flag": "--no-server-metrics"})

    def __post_init__(self) -> None:
        ReplayOptions.__post_init__(self)
        if self.api not in APIS:
            raise UsageError(f"--api must be one of {', '.join(APIS)}, got {self.api!r}")
        _check_url(self.url)
        if self.max_concurrency is not None:
            check_number("--max-concurrency", self.max_concurrency, minimum=1)
        if self.rate is not None and self.rate != math.inf:
            check_number("--rate", self.rate, minimum=MIN_RATE)
        check_number("--burstiness", self.burstiness, minimum=MIN_BURSTINESS)
        check_number("--time-scale", self.time_scale, minimum=0, maximum=MAX_TIME_SCALE)
        check_number("--timeout", self.timeout_s, above=0)
        check_number("--retries", self.retries, minimum=0, maximum=MAX_RETRIES)
        if self.vocab_size is not None:
            check_number("--vocab-size", self.vocab_size, minimum=2, maximum=MAX_VOCAB_SIZE)
        check_count("--max-output-tokens", self.max_output_tokens, 1)
        check_count("--max-prompt-tokens", self.max_prompt_tokens, 1)
        check_number("--seed", self.seed, minimum=0, maximum=MAX_SEED)

    @classmethod
    def refusal(cls, name: str, flag: str, owners: Sequence[type[ReplayOptions]]) -> str:
        return cls.refusals.get(name) or f"{flag} does not apply to --endpoint"

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
