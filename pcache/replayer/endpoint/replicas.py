"""`replay --endpoint ROUTER --replica-metrics URL,...`: each replica's /metrics around a pass.

A router forwards each request to one replica; what each replica did is in its own /metrics:
requests finished (`request_success_total`, vLLM's and pcache serve's), prompt tokens looked up
in its prefix cache and found there (`prefix_cache_queries` / `prefix_cache_hits`, tokens;
SGLang: `prompt_tokens` / `cached_tokens`). Each is read before and after the measured pass;
a replica that cannot be read says why, and the others are still reported.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pcache.replayer.endpoint.url import masked

# (requests, queries, hits): the counters of each server kind, summed over their labels
REPLICA_COUNTERS = {
    "requests": ("vllm:request_success", "pcache:request_success", "sglang:num_requests"),
    "prompt_tokens": ("vllm:prefix_cache_queries", "pcache:prefix_cache_queries"),
    "hit_tokens": ("vllm:prefix_cache_hits", "pcache:prefix_cache_hits"),
    "sglang_prompt_tokens": ("sglang:prompt_tokens",),
    "sglang_hit_tokens": ("sglang:cached_tokens",),
}


@dataclass(slots=True)
class ReplicaCounts:
    url: str
    requests: float | None = None
    prompt_tokens: float | None = None
    hit_tokens: float | None = None
    error: str | None = None

    @property
    def hit_rate(self) -> float | None:
        if not self.prompt_tokens or self.hit_tokens is None:
            return None
        return round(self.hit_tokens / self.prompt_tokens, 6)

    def to_dict(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "requests": self.requests,
            "prompt_tokens": self.prompt_tokens,
            "hit_tokens": self.hit_tokens,
            "hit_rate": self.hit_rate,
            "error": self.error,
        }


def replica_counters(text: str) -> dict[str, float]:
    from prometheus_client.parser import text_string_to_metric_families

    names = {name: key for key, group in REPLICA_COUNTERS.items() for name in group}
    counters: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            base = sample.name.removesuffix("_total")
            if sample.name.endswith("_total") and base in names:
                key = names[base]
                counters[key] = counters.get(key, 0.0) + sample.value
    for own, sglang in (
        ("prompt_tokens", "sglang_prompt_tokens"),
        ("hit_tokens", "sglang_hit_tokens"),
    ):
        if own not in counters and sglang in counters:
            counters[own] = counters[sglang]
    return counters


async def read_replica(client: Any, options: Any, url: str) -> dict[str, float] | str:
    """A replica's counters, or why they could not be read."""
    from pcache.replayer.endpoint.server import SideFailure, side_request

    where = url.rstrip("/")
    if where.endswith("/v1"):
        where = where[: -len("/v1")]
    try:
        status, data = await side_request(client, options, "GET", f"{where}/metrics")
    except SideFailure as failure:
        return str(failure)
    if status != 200:
        return f"{masked(where)}/metrics answered HTTP {status}"
    try:
        return replica_counters(data.decode("utf-8", "replace"))
    except (ValueError, TypeError, KeyError, IndexError) as error:
        return f"{masked(where)}/metrics is not Prometheus text ({str(error)[:200]})"


def replica_deltas(urls: tuple[str, ...], before: list, after: list) -> list[ReplicaCounts]:
    """What each replica counted between the two readings."""
    rows = []
    for url, start, end in zip(urls, before, after, strict=True):
        row = ReplicaCounts(masked(url))
        if isinstance(start, str) or isinstance(end, str):
            row.error = start if isinstance(start, str) else end
        else:
            for key in ("requests", "prompt_tokens", "hit_tokens"):
                # a labelled counter has no sample before its first increment
                if key in end and end[key] >= start.get(key, 0.0):
                    setattr(row, key, end[key] - start.get(key, 0.0))
        rows.append(row)
    return rows


async def replica_models(client: Any, options: Any, urls: tuple[str, ...]) -> list[str]:
    """The models the replicas list at /v1/models (the first one each), where they answer."""
    import orjson

    from pcache.replayer.endpoint.server import SideFailure, side_request

    models = []
    for url in urls:
        base = url.rstrip("/")
        route = f"{base}/models" if base.endswith("/v1") else f"{base}/v1/models"
        try:
            status, data = await side_request(client, options, "GET", route)
            cards = orjson.loads(data).get("data") if status == 200 else None
        except (SideFailure, orjson.JSONDecodeError, AttributeError):
            continue
        if isinstance(cards, list) and cards and isinstance(cards[0], dict):
            name = cards[0].get("id")
            if isinstance(name, str) and name and name != "unknown":
                models.append(name)
    return models


async def router_workers(client: Any, options: Any) -> tuple[str, ...]:
    """The worker URLs a router lists: SGLang's router at /workers (0.3.x) or /list_workers."""
    import orjson

    from pcache.replayer.endpoint.server import SideFailure, side_request

    for route, key in (("/workers", "workers"), ("/list_workers", "urls")):
        try:
            status, data = await side_request(client, options, "GET", options.root_route(route))
            entries = orjson.loads(data).get(key) if status == 200 else None
        except (SideFailure, orjson.JSONDecodeError, AttributeError):
            continue
        if not isinstance(entries, list):
            continue
        urls = [entry.get("url") if isinstance(entry, dict) else entry for entry in entries]
        found = tuple(url for url in urls if isinstance(url, str) and url.startswith("http"))
        if found:
            return found
    return ()
