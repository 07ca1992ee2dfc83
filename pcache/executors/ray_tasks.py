"""The Ray executor: each item's function as a Ray task, results read back in order.

Ray is imported when this executor is made, never at start-up. Without a cluster address it
goes where `ray.init()` goes: the cluster running on this machine (`ray start --head`), else a
local one started for this process, sized to its cores; a process that has joined a cluster
already (a test's `ray.init(num_cpus=2)`, a notebook's) keeps it. Arguments shared by every
task are put in the object store once. At most `max_in_flight` tasks are outstanding, so the
results of a log of any length are held a few shards at a time.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from pcache.errors import UsageError

NEEDS_RAY = "--executor ray needs Ray: pip install 'pcache[ray]' (or pip install ray)"


def import_ray() -> Any:
    """The `ray` module, or the one-line `UsageError` that says how to install it."""
    try:
        import ray
    except ImportError:
        raise UsageError(NEEDS_RAY) from None
    return ray


CONNECT_TIMEOUT_S = 5.0
"""How long a named cluster's head may take to accept a connection (Ray itself waits minutes)."""


def check_reachable(address: str | None) -> None:
    """A one-line `UsageError` when `address` names a HOST:PORT (or ray://HOST:PORT) that
    accepts no connection, before `ray.init` would wait for it."""
    if address is None or address in ("auto", "local"):
        return
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        return  # Ray's own forms and errors
    import socket

    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT_S):
            pass
    except OSError as failure:
        reason = failure.strerror or type(failure).__name__
        raise UsageError(
            f"--ray-address {address}: nothing accepts connections there ({reason})"
        ) from None


class RayExecutor:
    """Runs each task on a Ray cluster (a local one unless `address` names another)."""

    name = "ray"
    distributed = True
    submitted = 0
    """Tasks submitted by every executor of this process (what tests and benchmarks check)."""

    def __init__(self, address: str | None = None, max_in_flight: int | None = None):
        ray = import_ray()
        if not ray.is_initialized():
            check_reachable(address)
            try:
                ray.init(
                    address=address,
                    include_dashboard=False,
                    logging_level="ERROR",
                    log_to_driver=False,
                )
            except (ConnectionError, ValueError, RuntimeError) as failure:  # forms Ray refuses
                reason = str(failure).splitlines()[0] if str(failure) else type(failure).__name__
                raise UsageError(f"--ray-address {address!r}: {reason}") from None
        self.ray = ray
        cpus = int(ray.cluster_resources().get("CPU", 1))
        self.max_in_flight = max_in_flight or max(2, 2 * cpus)
        self._remote: dict[Callable, Any] = {}

    def map(self, function: Callable[..., Any], items: Iterable[Any], *arguments: Any) -> Iterator:
        ray = self.ray
        remote = self._remote.get(function)
        if remote is None:
            remote = self._remote[function] = ray.remote(function)
        shared = [ray.put(argument) for argument in arguments]
        pending: deque = deque()
        for item in items:
            pending.append(remote.remote(item, *shared))
            RayExecutor.submitted += 1
            if len(pending) >= self.max_in_flight:
                yield _result(ray, pending.popleft())
        while pending:
            yield _result(ray, pending.popleft())


def _result(ray: Any, reference: Any) -> Any:
    """A task's value; a task that raised raises its own error here (not Ray's wrapper)."""
    try:
        return ray.get(reference)
    except ray.exceptions.RayTaskError as failure:
        cause = failure.cause if isinstance(failure.cause, BaseException) else None
        if cause is not None:
            raise cause from None
        raise
