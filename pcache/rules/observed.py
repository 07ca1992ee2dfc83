"""Observed against predicted: the cached tokens a log's usage reports beside pcache's reuse.

Where a request of the log carries the provider's cached-token count (`Request.cached_tokens`,
read from its usage: OpenAI, Anthropic, Gemini, Bedrock, OTel and OpenInference spans), lint
adds it up beside the tokens pcache predicts that request reuses under the run's profile, and
keeps the requests where the two differ most, each with the likely reason. A request where the
provider cached less than predicted is where a cache-breaker pcache does not model may hide.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field

from pcache.cache.profiles import Profile, assumption, profile_for_model
from pcache.prompt.shapes.request import (
    KIND_ANTHROPIC,
    KIND_BEDROCK,
    KIND_GEMINI,
    KIND_OPENAI,
    Request,
)
from pcache.rules.context import has_cache_marker
from pcache.rules.slots import OPENAI_MODEL

TOLERANCE_SHARE = 0.1
"""Observed and predicted agree within a block or this share of the prompt, whichever is
larger: the provider's tokenizer is not pcache's, so its counts differ by a few percent."""
KEEP_WORST = 5
"""Requests kept (the largest differences), whatever the length of the log."""
KEEP_REQUESTS = 10_000
"""Requests listed one by one (observed and predicted), the first of the log; the totals count
them all and `per_request_truncated` says when the list stops short."""
AGREEMENT = (
    "observed: the cached prompt tokens the log's usage reports; predicted: the tokens pcache"
    " reuses for the same requests under the profile (unlimited cache, serial, this log only);"
    f" they disagree by more than a block or {TOLERANCE_SHARE:.0%} of the prompt"
)


@dataclass(slots=True)
class Disagreement:
    request: str
    prompt_tokens: int
    observed: int
    predicted: int
    reason: str

    @property
    def gap(self) -> int:
        return self.observed - self.predicted

    def as_dict(self) -> dict[str, object]:
        return {
            "request": self.request,
            "prompt_tokens": self.prompt_tokens,
            "observed_cached_tokens": self.observed,
            "predicted_reusable_tokens": self.predicted,
            "reason": self.reason,
        }


@dataclass(frozen=True, slots=True)
class ObservedRequest:
    """One request reporting cached tokens: where it is, what was observed and predicted."""

    source: str
    line: int | None
    observed: int
    predicted: int

    def as_dict(self) -> dict[str, object]:
        return {
            "source": self.source,
            "line": self.line,
            "observed": self.observed,
            "predicted": self.predicted,
        }


@dataclass(slots=True)
class ObservedUsage:
    """The requests whose log line reports cached tokens, observed beside predicted."""

    requests: int = 0
    prompt_tokens: int = 0
    observed_tokens: int = 0
    predicted_tokens: int = 0
    disagreeing: int = 0
    cached_less: int = 0
    """Disagreeing requests where the provider cached less than predicted."""
    worst: list[Disagreement] = field(default_factory=list)
    """The largest differences, largest first (at most `KEEP_WORST`)."""
    per_request: list[ObservedRequest] = field(default_factory=list)
    """Each request's figures in log order (the first `KEEP_REQUESTS`)."""
    _heap: list[tuple[int, int, Disagreement]] = field(default_factory=list, repr=False)

    def add(
        self,
        request: Request,
        prompt_tokens: int,
        predicted: int,
        profile: Profile,
        block_size: int,
        previous: Request | None,
    ) -> None:
        observed = request.cached_tokens
        if observed is None:
            return
        self.requests += 1
        self.prompt_tokens += prompt_tokens
        self.observed_tokens += observed
        self.predicted_tokens += predicted
        if len(self.per_request) < KEEP_REQUESTS:
            self.per_request.append(
                ObservedRequest(request.source, request.line, observed, predicted)
            )
        tolerance = max(block_size, math.ceil(TOLERANCE_SHARE * prompt_tokens))
        if abs(observed - predicted) <= tolerance:
            return
        self.disagreeing += 1
        self.cached_less += observed < predicted
        reason = likely_reason(
            request, prompt_tokens, observed, predicted, profile, block_size, previous
        )
        entry = Disagreement(request.label, prompt_tokens, observed, predicted, reason)
        item = (abs(entry.gap), -self.disagreeing, entry)  # ties: the earlier request first
        if len(self._heap) < KEEP_WORST:
            heapq.heappush(self._heap, item)
        else:
            heapq.heappushpop(self._heap, item)
        self.worst = [e for _, _, e in sorted(self._heap, key=lambda i: (-i[0], -i[1]))]

    def as_dict(self) -> dict[str, object]:
        return {
            "assumes": AGREEMENT,
            "requests": self.requests,
            "prompt_tokens": self.prompt_tokens,
            "observed_cached_tokens": self.observed_tokens,
            "predicted_reusable_tokens": self.predicted_tokens,
            "disagreeing_requests": self.disagreeing,
            "cached_less_than_predicted": self.cached_less,
            "largest_differences": [entry.as_dict() for entry in self.worst],
            "per_request": [entry.as_dict() for entry in self.per_request],
            "per_request_truncated": self.requests > len(self.per_request),
        }


def provider_of(request: Request) -> str | None:
    """The provider profile of the host a request was sent to, where its shape says so."""
    if request.kind == KIND_ANTHROPIC:
        return "anthropic"
    if request.kind == KIND_BEDROCK:
        return "bedrock"
    if request.kind == KIND_GEMINI:
        return "gemini"
    if request.kind == KIND_OPENAI and OPENAI_MODEL.match(request.model or ""):
        return "openai"
    return None


def likely_reason(
    request: Request,
    prompt_tokens: int,
    observed: int,
    predicted: int,
    profile: Profile,
    block_size: int,
    previous: Request | None,
) -> str:
    """Why the provider's count may differ from the prediction, the likeliest first."""
    provider = provider_of(request)
    host = profile_for_model(provider, request.model) if provider else None
    model = request.model or "this model"
    if observed < predicted:
        if observed == 0 and host is not None and prompt_tokens < host.min_tokens:
            return (
                f"provider minimum: {provider} caches nothing shorter than"
                f" {host.min_tokens:,} tokens for {model}"
            )
        if observed == 0 and provider in ("anthropic", "bedrock") and not has_cache_marker(request):
            return f"no cache marker: {provider} caches only at breakpoints"
        gap = _gap(request, previous)
        ttl = host.ttl_seconds if host is not None else profile.ttl_seconds
        if gap is not None and ttl is not None and gap > ttl:
            return (
                f"TTL: {gap:,.0f} s after the session's previous request, beyond the"
                f" {ttl:,.0f} s cache lifetime"
            )
        if observed and host is not None and host.name != profile.name:
            return (
                f"a different profile: {provider} reuses {assumption(host, block_size)}, the"
                f" {profile.name} profile {assumption(profile, block_size)};"
                f" lint it with --profile {provider}"
            )
        return (
            "a cache not shared: another replica, region, organization or cache key served it,"
            " or the entry was evicted (or a change pcache does not see)"
        )
    if predicted == 0 and previous is None:
        return "cached by requests before this log (the first of its session)"
    if predicted == 0 and profile.min_tokens and prompt_tokens < profile.min_tokens:
        return (
            f"profile minimum: the provider caches below the {profile.name} profile's"
            f" {profile.min_tokens:,} tokens"
        )
    if provider is not None and provider != profile.name:
        return f"a different profile: sent to {provider}; lint it with --profile {provider}"
    return (
        f"a different block size or granularity than the {profile.name} profile's"
        f" ({assumption(profile, block_size)}), or an entry shared with requests outside this log"
    )


def _gap(request: Request, previous: Request | None) -> float | None:
    """Seconds since the session's previous request, when both carry a timestamp."""
    if previous is None or request.timestamp is None or previous.timestamp is None:
        return None
    return (request.timestamp - previous.timestamp) / 1000  # timestamps are in ms
