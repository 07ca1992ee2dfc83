"""`llm-d`: llm-d / Gateway API Inference Extension's scheduler with the *approximate*
prefix-cache scorer (GIE `prefix` plugin), the queue scorer and the KV-cache scorer.

Approximate prefix index: the text view is cut into blocks of `block_chars` characters
(16 tokens x 4 characters = 64), at most `max_blocks` of them (256), the trailing partial block
dropped; each block's key chains the previous one (GIE: xxhash64 of the block's bytes and the
previous hash; here the text itself, or on hash-id traces the block's hash id and its offset,
which identify the same prefixes). Each pod has an LRU of `lru_capacity_per_pod` keys
(31,250); after a pod is chosen, every key of the request is added or refreshed for it.

Scores, each in [0, 1], summed with weights (llm-d's default profile: prefix 3, queue 2, KV
utilisation 2):
- prefix: the blocks a pod holds among the leading blocks that some pod holds (the walk stops
  at the first block no pod holds), over the request's blocks;
- queue: (max queue - pod queue) / (max - min), 1 when all are equal. The queue is the pod's
  requests in flight (the simulator has no separate waiting queue);
- KV cache: 1 - utilisation, the prompt blocks in flight over the pod's capacity (0 with
  unlimited caches).
The highest total wins; ties go to a seeded random choice (GIE's max-score picker shuffles).
A serial replay has nothing in flight: queue and KV scores are equal everywhere, so the
prefix score decides, and ties are random.

Parameters: `block_chars` 64, `max_blocks` 256, `lru_capacity_per_pod` 31250,
`prefix_weight` 3, `queue_weight` 2, `kv_weight` 2, `seed` 0.
"""

from __future__ import annotations

import random
from collections import OrderedDict
from dataclasses import dataclass, field

from pcache.replayer.fleet.routers.request import FleetState, RoutedRequest


@dataclass(frozen=True, slots=True)
class Parameters:
    """llm-d's parameters (GIE prefix plugin and llm-d's scorer weights)."""

    block_chars: int = field(default=64, metadata={"minimum": 1})
    max_blocks: int = field(default=256, metadata={"minimum": 1})
    lru_capacity_per_pod: int = field(default=31250, metadata={"minimum": 1})
    prefix_weight: float = 3.0
    queue_weight: float = 2.0
    kv_weight: float = 2.0
    seed: int = 0


def block_keys(request: RoutedRequest, block_chars: int, max_blocks: int) -> list:
    """The keys of the request's whole character blocks, each naming its prefix."""
    count = min(request.text_chars // block_chars, max_blocks)
    if request.unit_chars is None:
        text = request.units
        return [text[: (index + 1) * block_chars] for index in range(count)]
    keys, unit, start = [], 0, 0  # start: characters before `unit`
    chars = request.unit_chars
    for index in range(count):
        end = (index + 1) * block_chars
        while start + chars[unit] < end:
            start += chars[unit]
            unit += 1
        keys.append((request.units[unit], end - start))
    return keys


class Router:
    """Weighted prefix, queue and KV-utilisation scores; the highest wins."""

    def __init__(self, num_replicas: int, parameters: Parameters):
        self.parameters = parameters
        self.indexes: list[OrderedDict] = [OrderedDict() for _ in range(num_replicas)]
        self.generator = random.Random(parameters.seed)

    def route(self, request: RoutedRequest, fleet: FleetState) -> int:
        parameters = self.parameters
        keys = block_keys(request, parameters.block_chars, parameters.max_blocks)
        held = [0] * len(self.indexes)
        for key in keys:
            holders = [pod for pod, index in enumerate(self.indexes) if key in index]
            if not holders:
                break
            for pod in holders:
                held[pod] += 1
        queues = fleet.in_flight
        high, low = max(queues), min(queues)
        scores = []
        for pod in range(len(self.indexes)):
            prefix = held[pod] / len(keys) if keys else 0.0
            queue = 1.0 if high == low else (high - queues[pod]) / (high - low)
            capacity = fleet.capacity_blocks
            usage = min(fleet.active_blocks[pod] / capacity, 1.0) if capacity else 0.0
            scores.append(
                parameters.prefix_weight * prefix
                + parameters.queue_weight * queue
                + parameters.kv_weight * (1.0 - usage)
            )
        best = max(scores)
        tied = [pod for pod, score in enumerate(scores) if score == best]
        chosen = tied[0] if len(tied) == 1 else self.generator.choice(tied)
        index = self.indexes[chosen]
        for key in keys:
            index[key] = None
            index.move_to_end(key)
        while len(index) > parameters.lru_capacity_per_pod:
            index.popitem(last=False)
        return chosen
