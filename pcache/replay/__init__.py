"""Replay drivers (simulate, engine) and their one report type.

The package is callable: `pcache.replay(trace, ...)` is `pcache.api.replay`.
"""

from pcache.api import callable_module

callable_module(__name__, "replay")
