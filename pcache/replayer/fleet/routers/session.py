"""`session`: a consistent hash of the session id (vLLM production-stack's `session` router).

production-stack hashes the `session_key` (a header or body field) onto a `uhashring` ring of
the endpoints; a request without one goes to the endpoint with the lowest QPS. Here the
session id is the trace's (`session_id`, Bailian `chat_id`), and the QPS of a replica is the
number of requests routed to it in the last `qps_window_s` seconds of trace time (ties to the
first replica). Mooncake traces carry no session id: every request takes the QPS branch.

Parameters: `points` (virtual nodes per replica, default 160, as uhashring's), `qps_window_s`
(default 60).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from pcache.replayer.fleet.routers.request import FleetState, RoutedRequest
from pcache.replayer.fleet.routers.ring import HashRing


@dataclass(frozen=True, slots=True)
class Parameters:
    """session's parameters."""

    points: int = field(default=160, metadata={"minimum": 1})
    """Virtual nodes per replica on the ring."""
    qps_window_s: float = field(default=60.0, metadata={"above": 0})
    """Requests without a session: the window over which each replica's QPS is counted."""


class Router:
    """The session's replica on the ring, else the lowest-QPS replica."""

    def __init__(self, num_replicas: int, parameters: Parameters):
        self.ring = HashRing(num_replicas, parameters.points)
        self.window_ms = parameters.qps_window_s * 1000.0
        self.arrivals: list[deque[float]] = [deque() for _ in range(num_replicas)]

    def route(self, request: RoutedRequest, fleet: FleetState) -> int:
        now = request.now_ms
        for arrivals in self.arrivals:
            while arrivals and arrivals[0] <= now - self.window_ms:
                arrivals.popleft()
        session = request.session_id
        if session is not None:
            chosen = self.ring.owner(session.encode())
        else:
            chosen = min(range(len(self.arrivals)), key=lambda i: len(self.arrivals[i]))
        self.arrivals[chosen].append(now)
        return chosen
