"""`ReplayArguments(trace=..., **options)`: one driver's options from loose keywords.

The older spelling of `pcache.replayer.run.replay_options`, kept for callers that still name the
trace beside the options (it is read by the caller, not kept).
"""

from __future__ import annotations

from typing import Any

from pcache.replayer.options import ReplayOptions


def ReplayArguments(trace: Any = None, mode: str = "simulate", **options: Any) -> ReplayOptions:
    """`replay_options(mode, **options)`; `trace` is ignored."""
    from pcache.replayer.run import replay_options

    return replay_options(mode, **options)
