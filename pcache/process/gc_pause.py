"""`paused_gc()`: no cyclic garbage collection while a command builds large, long-lived
structures.

Reading a trace of a million requests, linting a large log or replaying it over a pool of a
million blocks creates millions of container objects that all stay alive to the end. The
cyclic collector would traverse them again and again (a third to a half of the run time) and
free nothing: what these loops discard is freed by reference counting. Collection resumes on
exit, with what the block kept moved straight to the oldest generation (`gc.freeze`, then
`gc.unfreeze`): otherwise the first collection after it would traverse all of it at once.

The collector is the process's, not a library's: the command line pauses it around a command
(`pcache.cli.process_policy`); library code never does.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused_gc() -> Iterator[None]:
    """Disable the cyclic garbage collector inside the block (re-entrant)."""
    was_enabled = gc.isenabled()
    gc.disable()
    frozen = gc.get_freeze_count()
    try:
        yield
    finally:
        if was_enabled:
            if not frozen:  # (someone else's frozen objects stay frozen)
                gc.freeze()
                gc.unfreeze()
            gc.enable()
