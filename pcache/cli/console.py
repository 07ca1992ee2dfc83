"""The two consoles (results on stdout, messages on stderr) and error reporting."""

from __future__ import annotations

import contextlib
import os
import sys

from rich.console import Console

_width = int(os.environ["COLUMNS"]) if os.environ.get("COLUMNS", "").isdigit() else None
stdout = Console(soft_wrap=False, width=_width, highlight=False)
stderr = Console(stderr=True, soft_wrap=True, width=_width, highlight=False)


def _broken_pipe() -> None:
    """rich exits 1 on a closed stdout; pcache reports it like any other write (see app.py)."""
    raise BrokenPipeError(32, "standard output is closed")


stdout.on_broken_pipe = _broken_pipe  # type: ignore[method-assign]


def write_json(data: bytes) -> None:
    """Machine output goes to stdout as is, never through rich's markup."""
    sys.stdout.write(data.decode())
    sys.stdout.write("\n")
    sys.stdout.flush()


def error(message: str) -> None:
    """One line on stderr: `pcache: error: <message>`."""
    _message(f"pcache: error: {message}")


def warning(message: str) -> None:
    _message(f"pcache: warning: {message}")


def _message(line: str) -> None:
    with contextlib.suppress(OSError, ValueError):  # stderr closed: the exit code tells
        stderr.print(line, markup=False, highlight=False, soft_wrap=True)
