"""The machine a measurement ran on, named as the kernel names it: its CPU, cores and load."""

from __future__ import annotations

import platform
from dataclasses import dataclass


def cpu_name() -> str:
    """The CPU's model name from /proc/cpuinfo, else what `platform` knows."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "?"


def physical_cores() -> int:
    """Physical cores this process may run on: distinct (package, core) pairs of its CPUs in
    /proc/cpuinfo, else the CPUs it may run on (hyperthreads count once where Linux says so)."""
    import os

    allowed = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    cores: set[tuple[str, str]] = set()
    processor = package = None
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                key, _, value = line.partition(":")
                key, value = key.strip(), value.strip()
                if key == "processor":
                    processor, package = int(value), "0"
                elif key == "physical id":
                    package = value
                elif key == "core id" and (allowed is None or processor in allowed):
                    cores.add((str(package), value))
    except (OSError, ValueError):
        cores.clear()
    if cores:
        return len(cores)
    return len(allowed) if allowed else os.cpu_count() or 1


@dataclass(frozen=True, slots=True)
class LoadReading:
    """The machine's load at one moment: the 1-minute load average and how many tasks of
    other processes were running (Linux's runnable count minus this process's own)."""

    average: float
    others_running: int


class LoadMeter:
    """Reads the machine's load from /proc (Linux); elsewhere the load average alone."""

    def read(self) -> LoadReading:
        import os

        try:
            with open("/proc/loadavg", encoding="ascii") as loadavg:
                fields = loadavg.read().split()
            average, running = float(fields[0]), int(fields[3].split("/")[0])
        except (OSError, ValueError, IndexError):
            average = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
            return LoadReading(average, 0)
        return LoadReading(average, max(running - _own_running_threads(), 0))


def _own_running_threads() -> int:
    """This process's threads in state R (running or runnable) right now."""
    import os

    count = 0
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return 1
    for task in tasks:
        try:
            with open(f"/proc/self/task/{task}/stat", encoding="ascii") as stat:
                state = stat.read().rpartition(")")[2].split()[0]
        except (OSError, IndexError):
            continue
        count += state == "R"
    return count
