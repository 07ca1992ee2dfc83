"""The CPUs an engine's threads run on (`--engine-cpus`), as Linux's CPU lists write them.

vLLM's CPU build binds its model threads to cores (`VLLM_CPU_OMP_THREADS_BIND`); this does
the same for pcache's engine, for machines whose cores are dedicated to it. Where the server,
its clients and other processes share the same few cores, binding is not a gain: on two
cores with `vllm bench serve` and one model thread, prefix-repetition's TTFT p50 was 44.8
and 45.9 ms with the engine's process on core 0 against 48.2 and 48.6 ms unbound (one
server, in turn), but beside a vLLM server bound to the same core, `bench/serve_ab.py
--engine-cpus` measured the bound engine's TTFT p50 1.12x, 0.99x and 1.08x of vLLM's
(random, prefix-repetition, random-prefix) where the unbound one was 0.99x, 1.01x, 1.00x.
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
