"""The two consoles (results on stdout, messages on stderr) and error reporting."""

from __future__ import annotations

import os
import sys

from rich.console import Console

_width = int(os.environ["COLUMNS"]) if os.environ.get("COLUMNS", "").isdigit() else None
stdout = Console(soft_wrap=False, width=_width, highlight=False)
stderr = Console(stderr=True, soft_wrap=True, width=_width, highlight=False)


def write_json(data: bytes) -> None:
    """Machine output goes to stdout as is, never through rich's markup."""
    sys.stdout.write(data.decode())
    sys.stdout.write("\n")
    sys.stdout.flush()


def error(message: str) -> None:
    """One line on stderr: `pcache: error: <message>`."""
    stderr.print(f"pcache: error: {message}", markup=False, highlight=False, soft_wrap=True)


def warning(message: str) -> None:
    stderr.print(f"pcache: warning: {message}", markup=False, highlight=False, soft_wrap=True)
