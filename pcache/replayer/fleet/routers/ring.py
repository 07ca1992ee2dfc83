"""A consistent-hash ring: `points` virtual nodes per replica, looked up clockwise.

Positions are 64-bit digests (BLAKE2b) of `replica-<i>-<point>`; a key's position is the
digest of its bytes. The routers' own hash functions (KubeAI: xxhash, uhashring: MD5) place
nodes elsewhere on the ring; the statistics of the placement, not its exact points, are what
is modelled.
"""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Iterator


def hash64(data: bytes) -> int:
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big")


class HashRing:
    """Virtual nodes of every replica, sorted by position."""

    def __init__(self, num_replicas: int, points: int):
        assert num_replicas >= 1 and points >= 1
        nodes = sorted(
            (hash64(f"replica-{replica}-{point}".encode()), replica)
            for replica in range(num_replicas)
            for point in range(points)
        )
        self.positions = [position for position, _ in nodes]
        self.replicas = [replica for _, replica in nodes]

    def walk(self, key: bytes) -> Iterator[int]:
        """Replicas clockwise from `key`'s position (each virtual node once; repeats)."""
        start = bisect.bisect_left(self.positions, hash64(key))
        count = len(self.positions)
        for step in range(count):
            yield self.replicas[(start + step) % count]

    def owner(self, key: bytes) -> int:
        return next(self.walk(key))
