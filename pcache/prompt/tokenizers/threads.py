"""Encoding a batch of pieces on several threads: tiktoken and `tokenizers` let go of the GIL
while they encode, so threads scale where the text is long enough to pay for the hand-off.

The pool belongs to the process that started it: a forked child (lint's token stage,
`pcache.rules.token_worker`) inherits the pool without its threads, and starts its own."""

from __future__ import annotations

import os
import threading
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
    """`encode` mapped over pieces, on `threads` threads for a large batch (in order).

    `encode_batch`, when given, encodes a list of pieces at once (as `encode` would each): a
    thread then hands its whole share to it, one call that holds the GIL only at its ends."""

    def __init__(
        self,
        encode: Callable[[str], list[int]],
        threads: int = 1,
        encode_batch: Callable[[list[str]], list[Any]] | None = None,
    ):
        self.encode = encode
        self.threads = threads
        self.encode_batch = encode_batch or self._each
        self._pool: Any = None
        self._lock = threading.Lock()
        self._owner = os.getpid()
        """The process whose threads `_pool` runs on."""

    def _each(self, pieces: list[str]) -> list[Any]:
        return list(map(self.encode, pieces))

    def __call__(self, pieces: list[str]) -> list[Any]:
        threads = min(self.threads, len(pieces))
        if threads <= 1 or sum(map(len, pieces)) < MIN_CHARACTERS_PER_THREAD * threads:
            return self.encode_batch(pieces)
        if self._owner != os.getpid():  # a forked child: the pool's threads stayed behind
            self._pool, self._lock, self._owner = None, threading.Lock(), os.getpid()
        with self._lock:  # (a background thread may encode while the caller's thread does)
            if self._pool is None or self._pool._max_workers != self.threads:
                from concurrent.futures import ThreadPoolExecutor

                self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="pcache-encode")
            pool = self._pool
        chunk = -(-len(pieces) // threads)
        batches = [pieces[start : start + chunk] for start in range(0, len(pieces), chunk)]
        encoded: list[Any] = []
        for ids in pool.map(self.encode_batch, batches):
            encoded += ids
        return encoded
