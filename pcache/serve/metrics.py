"""The server's Prometheus metrics, named as vLLM names the same things, under `pcache:`.

A dashboard built for vLLM reads them after renaming `vllm:` to `pcache:`. Prefix-cache
counters are in tokens and count first admissions only (a preempted request's re-admission
is not a new query), as vLLM's `prefix_cache_queries` and `prefix_cache_hits` do.
`cache_config_info` carries the KV cache's block size, dtype, block count, hash and whether
prefix caching is on as labels, as vLLM's gauge of that name does.
"""

from __future__ import annotations

from collections.abc import Callable

# vllm/v1/metrics/loggers.py: the buckets of vllm:time_to_first_token_seconds
TTFT_BUCKETS = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75,
    1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
)  # fmt: skip
FINISHED_REASONS = ("stop", "length", "abort", "error")
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class ServerMetrics:
    """Counters, gauges and the TTFT histogram of one served model, in their own registry."""

    def __init__(
        self,
        model_name: str,
        num_running: Callable[[], int],
        num_waiting: Callable[[], int],
        kv_usage: Callable[[], float],
        cache_config: dict[str, str] | None = None,
    ) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
        from prometheus_client.process_collector import ProcessCollector

        self.registry = registry = CollectorRegistry(auto_describe=True)
        ProcessCollector(registry=registry)
        labels = ("model_name",)

        def counter(name: str, help: str):
            return Counter(f"pcache:{name}", help, labels, registry=registry).labels(model_name)

        def gauge(name: str, help: str, read: Callable[[], float]) -> None:
            Gauge(f"pcache:{name}", help, labels, registry=registry).labels(
                model_name
            ).set_function(read)

        self.prefix_cache_queries = counter(
            "prefix_cache_queries", "Prompt tokens looked up in the prefix cache."
        )
        self.prefix_cache_hits = counter(
            "prefix_cache_hits", "Prompt tokens found in the prefix cache."
        )
        self.prompt_tokens = counter("prompt_tokens", "Prompt tokens of finished requests.")
        self.generation_tokens = counter("generation_tokens", "Tokens generated.")
        self.request_success = Counter(
            "pcache:request_success",
            "Requests finished, by reason (stop, length, abort, error).",
            (*labels, "finished_reason"),
            registry=registry,
        )
        for reason in FINISHED_REASONS:  # as vLLM does: every reason counted from 0
            self.request_success.labels(model_name, reason)
        self.rejected = counter("requests_rejected", "Requests refused because the queue is full.")
        self.time_to_first_token = Histogram(
            "pcache:time_to_first_token_seconds",
            "From the request's arrival at the server to its first token.",
            labels,
            buckets=TTFT_BUCKETS,
            registry=registry,
        ).labels(model_name)
        gauge("num_requests_running", "Requests in the running batch.", num_running)
        gauge("num_requests_waiting", "Requests queued for admission.", num_waiting)
        gauge("kv_cache_usage_perc", "Fraction of KV blocks referenced by requests.", kv_usage)
        if cache_config is not None:  # vLLM's vllm:cache_config_info: the labels carry it
            Gauge(
                "pcache:cache_config_info",
                "Information of the KV cache configuration (the labels; the value is 1).",
                (*cache_config, "engine"),
                registry=registry,
            ).labels(*cache_config.values(), "0").set(1)
        self.model_name = model_name

    def finished(self, reason: str) -> None:
        self.request_success.labels(self.model_name, reason).inc()

    def render(self) -> bytes:
        from prometheus_client import generate_latest

        return generate_latest(self.registry)
