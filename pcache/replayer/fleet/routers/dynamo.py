"""`dynamo`: NVIDIA Dynamo's KV router (docs v0.x cost), over the exact token-block index.

Dynamo's `KvIndexer` is a radix tree of the blocks workers report in KV events, so its
overlap for a worker is the request's blocks that worker holds: here the pool's own count
(`RoutedRequest.cached_tokens`), in blocks of the engine's block size. Per worker:

    cost = overlap_score_weight x prefill_blocks + decode_blocks

with prefill_blocks = (prompt tokens - cached tokens) / block size and decode_blocks = the
blocks of the requests in flight on that worker (the router's slot manager; here each
in-flight request counts its prompt's blocks). The lowest cost wins; with `temperature` 0
(the default) ties go to a seeded random choice among them, and with `temperature` > 0 the
worker is sampled from a softmax over the negated costs normalised by the largest. A serial
replay has nothing in flight, so the cost is the prefill alone: `precise` with random ties.

Parameters: `overlap_score_weight` (default 1.0, `--kv-overlap-score-weight`),
`temperature` (default 0.0, `--router-temperature`), `seed` (default 0).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from pcache.replayer.fleet.routers.request import FleetState, RoutedRequest


@dataclass(frozen=True, slots=True)
class Parameters:
    """dynamo's parameters (Dynamo's router flags)."""

    overlap_score_weight: float = 1.0
    """Weight of the prefill blocks against the decode blocks."""
    temperature: float = 0.0
    """0: the lowest cost; above: softmax sampling over normalised costs."""
    seed: int = 0
    """Seed of the tie-break and sampling generator."""


class Router:
    """The worker with the lowest prefill + decode block cost."""

    def __init__(self, num_replicas: int, parameters: Parameters):
        self.parameters = parameters
        self.generator = random.Random(parameters.seed)

    def route(self, request: RoutedRequest, fleet: FleetState) -> int:
        block_size = fleet.block_size
        prompt = request.record.input_length
        weight = self.parameters.overlap_score_weight
        costs = [
            weight * (prompt - cached) / block_size + active
            for cached, active in zip(request.cached_tokens, fleet.active_blocks, strict=True)
        ]
        temperature = self.parameters.temperature
        if temperature > 0:
            scale = max(costs) or 1.0
            logits = [-cost / scale / temperature for cost in costs]
            top = max(logits)
            weights = [math.exp(logit - top) for logit in logits]
            return self.generator.choices(range(len(costs)), weights)[0]
        lowest = min(costs)
        tied = [replica for replica, cost in enumerate(costs) if cost == lowest]
        return tied[0] if len(tied) == 1 else self.generator.choice(tied)
