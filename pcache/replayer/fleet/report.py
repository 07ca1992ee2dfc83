"""`FleetSummary`: what a replay over a fleet adds to its `ReplayReport` (`report.fleet`).

Per replica: requests, prompt tokens, hit tokens, evictions. For the fleet: load imbalance
(max over mean requests and prompt tokens per replica; 1.0 is perfectly even) and router
precision: a request is misrouted when some replica held a longer cached prefix of it than
the replica it was sent to, measured in tokens as that replica's pool counts them just
before the request arrived; `misrouted_tokens` is the sum over requests of the best
replica's cached tokens minus the chosen one's (the reuse routing left on the table).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pcache.replayer.report import ReplayReport


@dataclass(slots=True)
class ReplicaStats:
    """One replica's share of the trace and what its pool served."""

    replica: int
    requests: int = 0
    prompt_tokens: int = 0
    hit_tokens: int = 0
    hit_requests: int = 0
    evicted_blocks: int = 0
    peak_used_blocks: int = 0

    @property
    def token_hit_rate(self) -> float:
        return self.hit_tokens / self.prompt_tokens if self.prompt_tokens else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "token_hit_rate": self.token_hit_rate}


@dataclass(slots=True)
class FleetSummary:
    """The router, the replicas and how well the router used what they cached."""

    router: str
    num_replicas: int
    router_parameters: dict[str, Any]
    replicas: list[ReplicaStats] = field(default_factory=list)
    misrouted_requests: int = 0
    misrouted_tokens: int = 0
    best_hit_tokens: int = 0
    """Tokens the best replica held, summed over requests (the reuse the fleet held)."""

    def imbalance(self, values: list[int]) -> float:
        mean = sum(values) / len(values) if values else 0.0
        return max(values) / mean if mean else 0.0

    def to_dict(self) -> dict[str, Any]:
        requests = sum(replica.requests for replica in self.replicas)
        return {
            "router": self.router,
            "num_replicas": self.num_replicas,
            "router_parameters": self.router_parameters,
            "replicas": [replica.to_dict() for replica in self.replicas],
            "load_imbalance": {
                "requests": self.imbalance([r.requests for r in self.replicas]),
                "prompt_tokens": self.imbalance([r.prompt_tokens for r in self.replicas]),
            },
            "router_precision": {
                "misrouted_requests": self.misrouted_requests,
                "misrouted_share": self.misrouted_requests / requests if requests else 0.0,
                "misrouted_tokens": self.misrouted_tokens,
                "best_hit_tokens": self.best_hit_tokens,
            },
        }


@dataclass(frozen=True, slots=True)
class GridRow:
    """One (router, replica count) of a fleet grid, as its text table, chart and page show it."""

    router: str
    num_replicas: int
    token_hit_rate: float
    request_imbalance: float
    token_imbalance: float
    misrouted_share: float
    misrouted_tokens: int
    ttft_p50_ms: float
    ttft_p90_ms: float


def grid_rows(reports: list[ReplayReport]) -> list[GridRow]:
    """The rows of a fleet grid (`run_fleet`'s reports, routers outermost), from the same
    `FleetSummary.to_dict` as the JSON."""
    rows = []
    for report in reports:
        assert report.fleet is not None, "not a fleet replay"
        fleet = report.fleet.to_dict()
        imbalance, precision = fleet["load_imbalance"], fleet["router_precision"]
        rows.append(
            GridRow(
                fleet["router"],
                fleet["num_replicas"],
                report.token_hit_rate,
                imbalance["requests"],
                imbalance["prompt_tokens"],
                precision["misrouted_share"],
                precision["misrouted_tokens"],
                report.ttft_ms["p50"],
                report.ttft_ms["p90"],
            )
        )
    return rows


def by_router(rows: list[GridRow]) -> dict[str, list[GridRow]]:
    """The grid's rows per router, each in replica-count order (one line of the chart each)."""
    lines: dict[str, list[GridRow]] = {}
    for row in rows:
        lines.setdefault(row.router, []).append(row)
    return {name: sorted(line, key=lambda row: row.num_replicas) for name, line in lines.items()}
