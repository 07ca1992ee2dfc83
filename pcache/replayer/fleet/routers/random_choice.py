"""`random`: a uniformly random replica, from a seeded generator (SGLang's `random`).

Parameters: `seed` (default 0): the same seed and trace give the same routes.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from pcache.replayer.fleet.routers.request import FleetState, RoutedRequest


@dataclass(frozen=True, slots=True)
class Parameters:
    """random's parameters."""

    seed: int = 0
    """Seed of the generator (Python's Mersenne Twister)."""


class Router:
    """A uniformly random replica."""

    def __init__(self, num_replicas: int, parameters: Parameters):
        self.num_replicas = num_replicas
        self.generator = random.Random(parameters.seed)

    def route(self, request: RoutedRequest, fleet: FleetState) -> int:
        return self.generator.randrange(self.num_replicas)
