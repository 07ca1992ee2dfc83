"""pcache: find out why a prompt cache misses, and what fixing it buys.

The library API is `pcache.diff`, `pcache.hash`, `pcache.lint` and `pcache.replay` (defined in
`pcache.api`, and what the command line runs). Importing pcache loads nothing heavy.
A bad argument or input raises a subclass of `pcache.InputError` (`pcache.errors`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from pcache.version import __version__

if TYPE_CHECKING:
    from pcache.api import diff, hash, lint, replay
    from pcache.errors import (
        ArgumentError,
        ArgumentTypeError,
        ArgumentValueError,
        CycleError,
        InputError,
        NestingError,
        NotJsonError,
        PcacheError,
    )

__all__ = [
    "ArgumentError",
    "ArgumentTypeError",
    "ArgumentValueError",
    "CycleError",
    "InputError",
    "NestingError",
    "NotJsonError",
    "PcacheError",
    "__version__",
    "diff",
    "hash",
    "lint",
    "replay",
]


def __getattr__(name: str) -> Any:
    if name in __all__:
        module = "pcache.errors" if name.endswith("Error") else "pcache.api"
        return getattr(importlib.import_module(module), name)
    raise AttributeError(f"module 'pcache' has no attribute {name!r}")
