"""`EndpointOptions`: what `pcache replay --endpoint URL` is told: the server, arrivals, passes."""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from pcache.defaults import DEFAULT_REQUEST_TIMEOUT_S
from pcache.errors import OptionError, UsageError
from pcache.options.declared import option
from pcache.replayer.endpoint.url import joined, masked
from pcache.replayer.options import (
    MAX_OUTPUT_TOKENS,
    MAX_PROMPT_TOKENS,
    MAX_SEED,
    MODEL,
    TIME_SCALE,
    ReplayOptions,
    check_field,
)

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


def replica_urls(value: str | None) -> tuple[str, ...] | None:
    """`--replica-metrics`'s comma-separated URLs (None: not given)."""
    if value is None:
        return None
    return tuple(url.strip() for url in value.split(",") if url.strip())


def _check_url(url: str, name: str = "url", flag: str = "--endpoint") -> None:
    """An http(s) URL with a host and a valid port, or an `OptionError` quoting it."""
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
        raise OptionError(name, f"{problem}, got {masked(url)!r}", flag=flag)


@dataclass(frozen=True, slots=True, kw_only=True)
class EndpointOptions(ReplayOptions):
    """How to replay against a server: its URL and API, arrivals, concurrency and passes."""

    mode: ClassVar[str] = "endpoint"
    flags: ClassVar[tuple[str, ...]] = ("--endpoint",)
    refusals: ClassVar[dict[str, str]] = {
        "policy": "--endpoint predicts with the vLLM block pool: --policy vllm only"
    }

    url: str = option(
        "",
        flags=("--endpoint",),
        help="Replay against a live OpenAI-compatible server (vLLM, SGLang, pcache serve, a"
        " hosted API), e.g. http://127.0.0.1:8000/v1.",
        panel="endpoint",
        type=str | None,
    )
    model: str = option("", declared=MODEL)
    """The served model's name ("": the one the server lists at /v1/models)."""
    api: str | None = option(
        None,
        flags=("--api",),
        help="completions (token ids to /v1/completions), chat (the trace's messages to"
        " /v1/chat/completions) or anthropic (/v1/messages); default: chat for a trace of"
        " messages, else completions.",
        panel="endpoint",
    )
    """completions, chat or anthropic; None: chat for a trace of messages, else completions."""
    max_concurrency: int | None = option(
        None,
        flags=("--max-concurrency",),
        help="Most requests in flight (default: no limit).",
        panel="endpoint",
        minimum=1,
    )
    rate: float | None = option(
        None,
        flags=("--rate",),
        help="Requests/s (gamma arrivals, Poisson at --burstiness 1; inf: all at once);"
        " default: the trace's timestamps.",
        panel="endpoint",
    )
    burstiness: float = option(
        1.0,
        flags=("--burstiness",),
        help="With --rate: gamma shape (1: Poisson, <1 burstier).",
        panel="endpoint",
        command_default=1.0,
    )
    time_scale: float = option(1.0, declared=TIME_SCALE)
    compare_cache: bool = option(
        False,
        flags=("--compare-cache",),
        help="Two passes: the server's cache off (or cold) and on (or warm).",
        panel="endpoint",
        command_default=False,
    )
    reset_cache: bool = option(
        False,
        flags=("--reset-cache",),
        help="Reset the server's prefix cache first (vLLM /reset_prefix_cache, SGLang"
        " /flush_cache).",
        panel="endpoint",
        command_default=False,
    )
    api_key_env: str | None = option(
        None,
        flags=("--api-key-env",),
        help="Environment variable holding the API key (default OPENAI_API_KEY, or"
        " ANTHROPIC_API_KEY with --api anthropic); the key is never printed.",
        panel="endpoint",
    )
    timeout_s: float = option(
        300.0,
        flags=("--timeout",),
        help="Seconds to wait for a connection or a chunk.",
        panel="endpoint",
        command_default=300.0,
    )
    request_timeout_s: float = option(
        DEFAULT_REQUEST_TIMEOUT_S,
        flags=("--request-timeout",),
        help="Seconds a whole request may take (its stream included; side requests:"
        " at most 30); past it the request fails and the replay goes on.",
        panel="endpoint",
        command_default=DEFAULT_REQUEST_TIMEOUT_S,
    )
    """The deadline of a whole request: every attempt and its whole stream."""
    block_size_given: bool = False
    """True when `--block-size` was given: it then wins over the size the server publishes."""
    retries: int = option(
        2,
        flags=("--retries",),
        help="Retries of a request whose connection failed (never sent).",
        panel="endpoint",
        command_default=2,
        minimum=0,
    )
    ignore_eos: bool = option(
        False,
        flags=("--ignore-eos",),
        help="Ask the server to generate every output token.",
        panel="endpoint",
        command_default=False,
    )
    max_output_tokens: int | None = option(None, declared=MAX_OUTPUT_TOKENS)
    max_prompt_tokens: int | None = option(None, declared=MAX_PROMPT_TOKENS)
    vocab_size: int | None = option(
        None,
        flags=("--vocab-size",),
        help="Hash-id traces: the token ids sent are below this.",
        panel="endpoint",
        type=int,
        minimum=2,
    )
    seed: int = 0
    scrape_metrics: bool = option(
        True,
        flags=("--no-server-metrics",),
        help="Do not read the server's /metrics.",
        panel="endpoint",
        type=bool,
        command_default=False,
        read=operator.not_,
    )
    kv_events: str | None = option(
        None,
        flags=("--kv-events",),
        help="The server's KV event stream (vLLM's ZMQ PUB, e.g. tcp://127.0.0.1:5557): check"
        " block by block what it stored and evicted against pcache's pool (pcache[events]).",
        panel="endpoint",
    )
    """The server's KV event stream (a ZMQ endpoint): checked block by block."""
    replica_metrics: tuple[str, ...] = option(
        (),
        flags=("--replica-metrics",),
        help="Behind a router: the replicas' base URLs (comma-separated); each one's /metrics"
        " is read before and after, for per-replica requests and prefix hits.",
        panel="endpoint",
        type=str | None,
        read=replica_urls,
    )
    """Replicas behind a router: each one's /metrics is read before and after the pass."""

    def __post_init__(self) -> None:
        from pcache.replayer.arrivals import MAX_TIME_SCALE
        from pcache.replayer.endpoint.client import APIS

        ReplayOptions.__post_init__(self)
        if self.api is not None and self.api not in APIS:
            raise OptionError("api", f"must be one of {', '.join(APIS)}, got {self.api!r}")
        _check_url(self.url)
        check_field(self, "max_concurrency", minimum=1)
        if self.rate != math.inf:
            check_field(self, "rate", minimum=MIN_RATE)
        check_field(self, "burstiness", minimum=MIN_BURSTINESS)
        check_field(self, "time_scale", minimum=0, maximum=MAX_TIME_SCALE)
        check_field(self, "timeout_s", above=0)
        check_field(self, "request_timeout_s", above=0)
        check_field(self, "retries", minimum=0, maximum=MAX_RETRIES)
        check_field(self, "vocab_size", minimum=2, maximum=MAX_VOCAB_SIZE)
        check_field(self, "max_output_tokens", minimum=1)
        check_field(self, "max_prompt_tokens", minimum=1)
        check_field(self, "seed", minimum=0, maximum=MAX_SEED)
        if self.kv_events is not None:
            from pcache.replayer.endpoint.kv_events import check_endpoint

            check_endpoint(self.kv_events)
            if self.compare_cache:
                raise UsageError("--kv-events checks one pass: leave out --compare-cache")
        for url in self.replica_metrics:
            _check_url(url, "replica_metrics", "--replica-metrics")

    @classmethod
    def refusal(cls, name: str, flag: str, owners: Sequence[type[ReplayOptions]]) -> UsageError:
        if name in cls.refusals:
            return UsageError(cls.refusals[name])
        return OptionError(name, "does not apply to --endpoint", flag=flag)

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
