"""Ending a command without the interpreter's teardown, for the commands that ask for it."""

from __future__ import annotations

import os
import sys

_asked = {"skip": False}


def skip_teardown() -> None:
    """Let the process end, once the command's output is flushed, without freeing what the
    command built: a large lint leaves millions of objects that take the interpreter a quarter
    of a second or more to free one by one. Only for commands that started nothing that needs
    stopping (servers, Ray, child processes) and wrote everything through stdout and stderr."""
    _asked["skip"] = True


def reset() -> None:
    """Forget an earlier command's request (each run of the command line asks again)."""
    _asked["skip"] = False


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
