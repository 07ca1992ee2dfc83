"""Encoding a batch of pieces on several threads: tiktoken and `tokenizers` let go of the GIL
while they encode, so threads scale where the text is long enough to pay for the hand-off."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

MIN_CHARACTERS_PER_THREAD = 20_000
"""Below this much text per thread a batch is encoded on the calling thread."""


def default_jobs() -> int:
    """The number of cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


class ThreadedEncoder:
    """`encode` mapped over pieces, on `threads` threads for a large batch (in order)."""

    def __init__(self, encode: Callable[[str], list[int]], threads: int = 1):
        self.encode = encode
        self.threads = threads
        self._pool: Any = None

    def __call__(self, pieces: list[str]) -> list[list[int]]:
        threads = min(self.threads, len(pieces))
        if threads <= 1 or sum(map(len, pieces)) < MIN_CHARACTERS_PER_THREAD * threads:
            return list(map(self.encode, pieces))
        if self._pool is None or self._pool._max_workers != self.threads:
            from concurrent.futures import ThreadPoolExecutor

            self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="pcache-encode")
        chunk = -(-len(pieces) // threads)
        batches = [pieces[start : start + chunk] for start in range(0, len(pieces), chunk)]
        encoded: list[list[int]] = []
        for ids in self._pool.map(lambda batch: list(map(self.encode, batch)), batches):
            encoded += ids
        return encoded
