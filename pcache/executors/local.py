"""The in-process executor: each item's function called here, in order."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any


class LocalExecutor:
    """Runs each task in this process, one after the other (threads are the stage's own)."""

    name = "local"
    distributed = False

    def map(self, function: Callable[..., Any], items: Iterable[Any], *arguments: Any) -> Iterator:
        for item in items:
            yield function(item, *arguments)
