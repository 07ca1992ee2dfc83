"""glibc's malloc told to keep what a step frees, so the next step's tensors fault no pages.

A CPU step allocates and frees tensors of a few MiB (a large vocabulary's logits and their
probabilities, the gathered KV pages of a decode step). glibc serves an allocation above its
mmap threshold (128 KiB at first) with a fresh mapping and unmaps it when freed, and gives the
top of its heap back to the system beyond the trim threshold: either way the tensor of the
same size in the next step lands on new pages, about a thousand page faults for 4 MiB, which
cost more than the arithmetic on them (the sampler of a 128k vocabulary: 6.8 ms a step with
the defaults, 1.5 ms without the faults). vLLM's CPU build preloads tcmalloc for the same
reason; this sets the two thresholds instead (`mallopt`), once per process, on Linux only.

Large tensors on transparent huge pages. A step reads every weight once, the output
projection of a large vocabulary most of all (128,256 x 256 fp32 is 131 MB a step), and on
4 KiB pages that read runs below the memory's bandwidth. Told by `THP_MEM_ALLOC_ENABLE=1`,
torch aligns its CPU allocations of 2 MiB and more to huge pages and asks for them
(`madvise`). Measured on the 2-core Xeon (AVX-512) these benchmarks ran on, one thread,
alternately: a 131 MB sum 10.9 -> 8.1 ms, `bench/bench_decode.py --model bench-llama
--temperature 1` 17.5 -> 15.7 ms a step, a prefill of three 64-token suffixes over cached
prefixes 29.1 -> 26.6 ms, the same peak memory. `pcache`'s commands ask for it
(`ask_for_huge_pages`) unless the variable is set already; torch reads it once, at its first
allocation, so it counts only in a process that has not imported torch yet.
"""

from __future__ import annotations

import os
import sys
from collections.abc import MutableMapping

HUGE_PAGES_VARIABLE = "THP_MEM_ALLOC_ENABLE"

MMAP_THRESHOLD_BYTES = 32 * 1024 * 1024
"""glibc's largest mmap threshold on 64-bit systems; a bigger allocation is still mapped."""
TRIM_THRESHOLD_BYTES = 256 * 1024 * 1024
"""Free memory at the top of the heap kept for reuse before any is given back."""
_M_TRIM_THRESHOLD = -1  # glibc's malloc.h
_M_MMAP_THRESHOLD = -3

_applied: bool | None = None


def keep_freed_memory() -> bool:
    """Set glibc's thresholds (once); True when glibc took them, False elsewhere (another
    C library or allocator, another system)."""
    global _applied
    if _applied is None:
        _applied = _set_thresholds()
    return _applied


def _set_thresholds() -> bool:
    if not sys.platform.startswith("linux"):
        return False
    import ctypes  # here: every command imports this module at start

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    mapped = mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)
    trimmed = mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES)
    return mapped == 1 and trimmed == 1


def ask_for_huge_pages(environ: MutableMapping[str, str] = os.environ) -> None:
    """Set `THP_MEM_ALLOC_ENABLE=1` in `environ` (this process's, or a child's) unless it is
    set: a user's `0` keeps torch's default allocation."""
    environ.setdefault(HUGE_PAGES_VARIABLE, "1")
