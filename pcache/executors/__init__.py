"""Where the per-request stage (render, tokenize, hash) and per-replica simulations run.

`--executor local` (the default) runs them in this process, encoding on `--jobs` threads;
`--executor ray` (the `pcache[ray]` extra) runs them as Ray tasks over shards of the input
(`shards`: a JSONL file cut at line boundaries, each file of a directory), on a local cluster
or the one `--ray-address` names. Results are identical: a task computes exactly what the local
code computes for its shard, and the caller puts the shards' results back in input order.

An executor is an object with `map(function, items, *arguments)`: the results of
`function(item, *arguments)` for each item, in order, computed wherever the executor runs
them. The functions it runs live with their callers (`pcache.traces.sharded`,
`pcache.rules.remote_pieces`, `pcache.replayer.fleet.split`); this package knows nothing of
what they compute.
"""

from __future__ import annotations

from typing import Any

from pcache.defaults import DEFAULT_EXECUTOR, EXECUTORS

__all__ = ["DEFAULT_EXECUTOR", "EXECUTORS", "executor_of"]


def executor_of(name: str = DEFAULT_EXECUTOR, ray_address: str | None = None) -> Any:
    """The executor called `name` (`--executor`), joined to `ray_address` for Ray."""
    from pcache.errors import UsageError

    if name == "local":
        from pcache.executors.local import LocalExecutor

        return LocalExecutor()
    if name == "ray":
        from pcache.executors.ray_tasks import RayExecutor

        return RayExecutor(ray_address)
    raise UsageError(f"--executor must be {' or '.join(EXECUTORS)}, got {name!r}")
