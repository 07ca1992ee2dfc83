"""Structures a finished pass no longer needs, handed to the end of the process, not freed.

A lint of a large log leaves millions of objects behind (the reuse index, the segment cache,
the requests it holds); freeing them one by one takes a fifth of a second or more. When the
process ends right after without the interpreter's teardown (the command line's `lint`), there
is nothing to gain from freeing them: `keep_to_exit` asks for that, and `retain` then keeps
what it is given. Without that request `retain` does nothing: a library's memory is its own.
"""

from __future__ import annotations

_kept: list[object] = []
_asked = {"keep": False}


def keep_to_exit(enabled: bool = True) -> None:
    """Keep what `retain` is given until the process ends (or stop keeping, and forget it)."""
    _asked["keep"] = enabled
    if not enabled:
        _kept.clear()


def retain(value: object) -> None:
    """Hand `value` to the end of the process instead of freeing it now, when asked to."""
    if _asked["keep"]:
        _kept.append(value)
