"""`EndpointOptions`: what `pcache replay --endpoint URL` is told: the server, arrivals, passes."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from pcache.defaults import DEFAULT_REQUEST_TIMEOUT_S
from pcache.errors import UsageError
from pcache.numbers import check_number
from pcache.replayer.arrivals import MAX_TIME_SCALE
from pcache.replayer.endpoint.client import APIS
from pcache.replayer.endpoint.url import joined, masked
from pcache.replayer.options import MAX_SEED, ReplayOptions, check_count

MIN_RATE = 1e-3
"""Fewest requests per second (one every 1,000 s): a slower rate never ends a replay."""
MIN_BURSTINESS = 1e-2
"""Smallest gamma shape: smaller ones draw gaps of years between arrivals."""
MAX_RETRIES = 100
"""More retries of a refused connection only make a replay against a dead server hang."""
MAX_VOCAB_SIZE = 1 << 32
"""Token ids are drawn below `vocab_size` as 64-bit integers; no vocabulary comes near this."""
SIDE_REQUEST_TIMEOUT_S = 30.0
"""The most a side request (/v1/models, /metrics, /tokenize, a cache reset) may take; a
shorter --request-timeout bounds it too."""


def _check_url(url: str, flag: str = "--endpoint") -> None:
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
        raise UsageError(f"{flag} {problem}, got {masked(url)!r}")


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
    api: str | None = None
    """completions, chat or anthropic; None: chat for a trace of messages, else completions."""
    max_concurrency: int | None = None
    rate: float | None = None
    burstiness: float = 1.0
    time_scale: float = 1.0
    compare_cache: bool = False
    reset_cache: bool = False
    api_key_env: str | None = None
    timeout_s: float = field(default=300.0, metadata={"flag": "--timeout"})
    request_timeout_s: float = field(
        default=DEFAULT_REQUEST_TIMEOUT_S, metadata={"flag": "--request-timeout"}
    )
    """The deadline of a whole request: every attempt and its whole stream."""
    block_size_given: bool = False
    """True when `--block-size` was given: it then wins over the size the server publishes."""
    retries: int = 2
    ignore_eos: bool = False
    max_output_tokens: int | None = None
    max_prompt_tokens: int | None = None
    vocab_size: int | None = None
    seed: int = 0
    scrape_metrics: bool = field(default=True, metadata={"flag": "--no-server-metrics"})
    kv_events: str | None = None
    """The server's KV event stream (a ZMQ endpoint): checked block by block."""
    replica_metrics: tuple[str, ...] = ()
    """Replicas behind a router: each one's /metrics is read before and after the pass."""

    def __post_init__(self) -> None:
        ReplayOptions.__post_init__(self)
        if self.api is not None and self.api not in APIS:
            raise UsageError(f"--api must be one of {', '.join(APIS)}, got {self.api!r}")
        _check_url(self.url)
        if self.max_concurrency is not None:
            check_number("--max-concurrency", self.max_concurrency, minimum=1)
        if self.rate is not None and self.rate != math.inf:
            check_number("--rate", self.rate, minimum=MIN_RATE)
        check_number("--burstiness", self.burstiness, minimum=MIN_BURSTINESS)
        check_number("--time-scale", self.time_scale, minimum=0, maximum=MAX_TIME_SCALE)
        check_number("--timeout", self.timeout_s, above=0)
        check_number("--request-timeout", self.request_timeout_s, above=0)
        check_number("--retries", self.retries, minimum=0, maximum=MAX_RETRIES)
        if self.vocab_size is not None:
            check_number("--vocab-size", self.vocab_size, minimum=2, maximum=MAX_VOCAB_SIZE)
        check_count("--max-output-tokens", self.max_output_tokens, 1)
        check_count("--max-prompt-tokens", self.max_prompt_tokens, 1)
        check_number("--seed", self.seed, minimum=0, maximum=MAX_SEED)
        if self.kv_events is not None:
            from pcache.replayer.endpoint.kv_events import check_endpoint

            check_endpoint(self.kv_events)
            if self.compare_cache:
                raise UsageError("--kv-events checks one pass: leave out --compare-cache")
        for url in self.replica_metrics:
            _check_url(url, "--replica-metrics")

    @classmethod
    def refusal(cls, name: str, flag: str, owners: Sequence[type[ReplayOptions]]) -> str:
        return cls.refusals.get(name) or f"{flag} does not apply to --endpoint"

    @property
    def base(self) -> str:
        return self.url.rstrip("/")

    @property
    def shown(self) -> str:
        """The URL as outputs show it: credentials masked (`endpoint_url.masked`)."""
        return masked(self.base)

    def route(self, path: str) -> str:
        """The URL of an API route (`/completions`, `/models`), the URL's query kept."""
        return joined(self.url, path)

    def root_route(self, path: str) -> str:
        """The URL of a server route (`/metrics`, `/tokenize`): beside the URL's /v1."""
        return joined(self.url, path, strip_suffix="/v1")

    @property
    def side_deadline_s(self) -> float:
        return min(self.request_timeout_s, SIDE_REQUEST_TIMEOUT_S)

    @property
    def backend(self) -> str:
        names = {"completions": "openai", "chat": "openai-chat", "anthropic": "anthropic"}
        return names.get(self.api or "completions", "openai")
