"""A server's Prometheus `/metrics` before and after a replay, and what changed in between.

Read: `vllm:prefix_cache_queries` / `vllm:prefix_cache_hits` (tokens),
`vllm:prompt_tokens_by_source{source=...}`, `sglang:cached_tokens`, and pcache serve's
`pcache:` twins of vLLM's names. Counters are summed over their labels (one model per
server here); a counter that restarted (the server was restarted) gives no difference.
The KV block size comes from vLLM's `vllm:cache_config_info{block_size="..."}` gauge (and
pcache serve's `pcache:cache_config_info`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pcache.defaults import MAX_BLOCK_SIZE

COUNTERS = {
    "prefix_cache_queries": ("vllm:prefix_cache_queries", "pcache:prefix_cache_queries"),
    "prefix_cache_hits": ("vllm:prefix_cache_hits", "pcache:prefix_cache_hits"),
    "sglang_cached_tokens": ("sglang:cached_tokens",),
    "prompt_tokens": ("vllm:prompt_tokens", "pcache:prompt_tokens", "sglang:prompt_tokens"),
    "generation_tokens": (
        "vllm:generation_tokens",
        "pcache:generation_tokens",
        "sglang:generation_tokens",
    ),
}
BY_SOURCE = "vllm:prompt_tokens_by_source"
CONFIG_INFO = ("vllm:cache_config_info", "pcache:cache_config_info")


@dataclass(frozen=True, slots=True)
class MetricsSnapshot:
    """The counters pcache compares, summed over labels; `kind`: vllm, sglang, pcache or None."""

    kind: str | None
    counters: dict[str, float]
    prompt_tokens_by_source: dict[str, float] = field(default_factory=dict)
    block_size: int | None = None
    """Tokens per KV block, where the server publishes it (`cache_config_info`)."""
    cache_config: dict[str, str] = field(default_factory=dict)
    """The labels of `cache_config_info` (num_gpu_blocks, prefix_caching_hash_algo...)."""


def parse_metrics(text: str) -> MetricsSnapshot:
    from prometheus_client.parser import text_string_to_metric_families

    wanted = {name: key for key, names in COUNTERS.items() for name in names}
    counters: dict[str, float] = {}
    by_source: dict[str, float] = {}
    kinds: set[str] = set()
    block_size = None
    cache_config: dict[str, str] = {}
    for family in text_string_to_metric_families(text):
        prefix = family.name.split(":", 1)[0] if ":" in family.name else None
        if prefix in ("vllm", "sglang", "pcache"):
            kinds.add(prefix)
        for sample in family.samples:
            if sample.name in CONFIG_INFO and block_size is None:
                block_size = _block_size(sample.labels.get("block_size"))
                cache_config = dict(sample.labels)
            if not sample.name.endswith("_total"):
                continue
            base = sample.name.removesuffix("_total")
            if base in wanted:
                key = wanted[base]
                counters[key] = counters.get(key, 0.0) + sample.value
            elif base == BY_SOURCE:
                source = sample.labels.get("source", "")
                by_source[source] = by_source.get(source, 0.0) + sample.value
    kind = next((name for name in ("pcache", "vllm", "sglang") if name in kinds), None)
    return MetricsSnapshot(kind, counters, by_source, block_size, cache_config)


def _block_size(label: str | None) -> int | None:
    """A `block_size` label's value, when it is a block size."""
    if label is None or not label.isdigit():
        return None
    size = int(label)
    return size if 0 < size <= MAX_BLOCK_SIZE else None


def metrics_delta(before: MetricsSnapshot, after: MetricsSnapshot) -> dict[str, float]:
    """after - before for every counter both snapshots have (and that did not go down)."""
    delta: dict[str, float] = {}
    for key, value in after.counters.items():
        if key in before.counters and value >= before.counters[key]:
            delta[key] = value - before.counters[key]
    for source, value in after.prompt_tokens_by_source.items():
        old = before.prompt_tokens_by_source.get(source)
        if old is not None and value >= old:
            delta[f"prompt_tokens_by_source.{source}"] = value - old
    return delta
