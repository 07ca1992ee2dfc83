"""The CPUs an engine's threads run on (`--engine-cpus`), as Linux's CPU lists write them.

vLLM's CPU build binds its model threads to cores (`VLLM_CPU_OMP_THREADS_BIND`); an engine
left to the scheduler moves between cores and shares them with its server and clients. With
one model thread and `vllm bench serve` on the same two cores, prefix-repetition's TTFT p50
was 44.8 and 45.9 ms with the engine's process on core 0 against 48.2 and 48.6 ms free (two
runs each, one server, pinned and unpinned in turn).
"""

from __future__ import annotations

import os

from pcache.errors import UsageError


def parse_cpu_list(text: str) -> tuple[int, ...]:
    """`0`, `0-3`, `0,2,4-5` -> the CPU numbers, sorted; anything else is a usage error."""
    cpus: set[int] = set()
    for part in text.split(","):
        first, dash, last = part.strip().partition("-")
        try:
            low = int(first)
            high = int(last) if dash else low
        except ValueError:
            message = f"--engine-cpus takes a CPU list such as 0 or 0-3, got {text!r}"
            raise UsageError(message) from None
        if low < 0 or high < low:
            raise UsageError(f"--engine-cpus: {part.strip()!r} is not a range of CPU numbers")
        cpus.update(range(low, high + 1))
    return tuple(sorted(cpus))


def check_cpus(cpus: tuple[int, ...]) -> None:
    """A usage error unless this process may run on every one of `cpus`."""
    if not hasattr(os, "sched_setaffinity"):
        raise UsageError("--engine-cpus needs Linux (sched_setaffinity)")
    allowed = os.sched_getaffinity(0)
    missing = [cpu for cpu in cpus if cpu not in allowed]
    if missing:
        available = ",".join(map(str, sorted(allowed)))
        raise UsageError(
            f"--engine-cpus: no CPU {','.join(map(str, missing))} here (this process may use"
            f" {available})"
        )


def bind_to(cpus: tuple[int, ...] | None) -> None:
    """Run the calling thread, and the threads it starts from now on, on `cpus` (checked by
    `check_cpus`); None leaves it where it is."""
    if cpus is not None:
        os.sched_setaffinity(0, cpus)
