"""Ending a command without the interpreter's teardown, for the commands that ask for it."""

from __future__ import annotations

import os
import sys

_asked = {"skip": False, "main": False}


def skip_teardown() -> None:
    """Let the process end, once the command's output is flushed, without freeing what the
    command built: a large lint leaves millions of objects that take the interpreter a quarter
    of a second or more to free one by one (and what a pass is done with is not freed either,
    `pcache.process.retained`). Only for commands that start nothing that needs stopping (servers,
    Ray, child processes that outlive them) and write everything through stdout, stderr and
    files they have closed; only when the command line runs them (`begin`), not a test's
    runner in a longer process."""
    if _asked["main"]:
        _asked["skip"] = True
        from pcache.process.retained import keep_to_exit

        keep_to_exit()


def begin() -> None:
    """The command line runs a command: it may ask to skip the teardown (each run asks
    again)."""
    from pcache.process.retained import keep_to_exit

    _asked.update(skip=False, main=True)
    keep_to_exit(False)


def end(code: object) -> None:
    """Exit with `code` as `sys.exit` would; without the interpreter's teardown when the
    command asked for it (`skip_teardown`) and nothing measures the run (coverage, a tracer)."""
    if _asked["skip"] and (code is None or isinstance(code, int)) and _unobserved():
        try:
            sys.stderr.flush()
        finally:
            os._exit(code or 0)
    sys.exit(code)


def _unobserved() -> bool:
    return sys.gettrace() is None and sys.getprofile() is None and "coverage" not in sys.modules
