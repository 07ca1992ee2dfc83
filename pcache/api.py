"""The library API, and what the command line runs (re-exported as `pcache.diff`, ...).

`diff`, `hash`, `lint` and `replay` take request bodies (dicts), SDK objects (pydantic models:
anything with `model_dump`), or paths to JSON / JSONL files, and return the dataclasses whose
fields the commands' JSON output holds. Options left as None take the command line's defaults.
Each function imports what it needs when called.

`pcache.diff` and `pcache.replay` are also the names of a module and a package; those two are
made callable (`callable_module`), so `pcache.diff(a, b)` is this module's `diff` whether or
not `pcache.diff` was imported as a module first.
"""

from __future__ import annotations

import os
import sys
import types
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pcache.diff import DiffResult
    from pcache.pipeline import BlockHashReport, Settings
    from pcache.replay.arguments import ReplayArguments
    from pcache.replay.run import ReplayResult

__all__ = ["diff", "hash", "replay"]

RequestLike = Any
"""A request body (dict), an SDK object with `model_dump`, or a path (str, os.PathLike)."""


def _settings(
    tokenizer: str | None,
    block_size: int | None,
    hash_algo: str | None,
    cache_salt: str | None,
    date: str | None,
) -> Settings:
    from pcache.pipeline import Settings

    defaults = Settings()
    return Settings(
        tokenizer=tokenizer or defaults.tokenizer,
        block_size=block_size or defaults.block_size,
        hash_algo=hash_algo or defaults.hash_algo,
        cache_salt=cache_salt,
        date=date or defaults.date,
    )


def diff(
    a: RequestLike,
    b: RequestLike,
    *,
    tokenizer: str | None = None,
    block_size: int | None = None,
    hash_algo: str | None = None,
    cache_salt: str | None = None,
    date: str | None = None,
) -> DiffResult:
    """Where request `b` stops reusing `a`'s cached prefix, what each cache reuses, and why.

    >>> result = pcache.diff(earlier_body, later_body)
    >>> result.cause.kind, result.cause.b_path, result.first_divergence_token
    """
    from pcache.diff import compare

    return compare(a, b, _settings(tokenizer, block_size, hash_algo, cache_salt, date)).result


def hash(
    request: RequestLike,
    *,
    tokenizer: str | None = None,
    block_size: int | None = None,
    hash_algo: str | None = None,
    cache_salt: str | None = None,
    date: str | None = None,
) -> BlockHashReport:
    """The token count and chained block hashes of one request (a file must hold exactly one)."""
    from pcache.pipeline import BlockHashReport, hash_request
    from pcache.prompt.inputs import one_request

    settings = _settings(tokenizer, block_size, hash_algo, cache_salt, date)
    return BlockHashReport.of(hash_request(one_request(request), settings))


def replay(
    trace: str | os.PathLike[str] | Iterable[RequestLike] | ReplayArguments,
    *,
    progress: Callable[[int], None] | None = None,
    **options: Any,
) -> ReplayResult:
    """Replay a trace (a file, or request bodies in arrival order) against a prefix cache.

    `options` are the fields of `pcache.replay.arguments.ReplayArguments` (`policy`,
    `cache_blocks`, `cache_gb`, `model`, `concurrency`, `mode`, ...), the command's options.
    """
    from dataclasses import replace

    from pcache.prompt.inputs import is_path, values_from
    from pcache.replay.arguments import ReplayArguments
    from pcache.replay.run import run_replay

    if isinstance(trace, ReplayArguments):
        arguments = replace(trace, **options)
    else:
        source = os.fspath(trace) if is_path(trace) else tuple(values_from(trace))
        arguments = ReplayArguments(trace=source, **options)  # type: ignore[arg-type]
    return run_replay(arguments, progress=progress)


def callable_module(name: str, function: str) -> None:
    """Make module `name` callable as this module's `function` (see the module docstring)."""

    class CallableModule(types.ModuleType):
        def __call__(self, *args: Any, **kwargs: Any) -> Any:
            return getattr(sys.modules[__name__], function)(*args, **kwargs)

    CallableModule.__call__.__doc__ = globals()[function].__doc__
    sys.modules[name].__class__ = CallableModule
