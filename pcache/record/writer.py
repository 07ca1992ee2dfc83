"""Append whole JSONL lines to a file from any number of threads and event loops.

Each line goes out in one `write` on a descriptor opened with O_APPEND, under a lock, so lines
never interleave. A recording holds prompts: a file it creates is readable by its owner only
(0600), and a file that exists keeps the mode it has. A failure to write is logged once and
swallowed: recording must never break the request it records.
"""

from __future__ import annotations

import logging
import os
import stat
import threading
from pathlib import Path

logger = logging.getLogger("pcache.record")

RECORDING_MODE = 0o600
"""The mode of a recording pcache creates (it holds prompts): its owner's only."""


class LineWriter:
    """Appends lines to `path` (created on first write, parent directories included)."""

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)
        self.failures = 0
        self._lock = threading.Lock()
        self._descriptor: int | None = None

    def write(self, line: bytes) -> bool:
        """Append one line (it must end with a newline); False when it could not be written."""
        assert line.endswith(b"\n") and b"\n" not in line[:-1]
        try:
            with self._lock:
                if self._descriptor is None:
                    self.path.parent.mkdir(parents=True, exist_ok=True)
                    self._descriptor = _open_for_append(self.path)
                view = memoryview(line)
                while view:
                    view = view[os.write(self._descriptor, view) :]
            return True
        except OSError as error:
            self.failures += 1
            if self.failures == 1:
                logger.warning("pcache: cannot record to %s: %s", self.path, error)
            return False

    def close(self) -> None:
        with self._lock:
            if self._descriptor is not None:
                os.close(self._descriptor)
                self._descriptor = None


def _open_for_append(path: Path) -> int:
    """A descriptor appending to the regular file `path` (created if missing).

    Opened without blocking, so a FIFO with no reader cannot hang the request being recorded;
    anything but a regular file is refused like any other failure to write.
    """
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
    descriptor = os.open(path, flags | getattr(os, "O_NONBLOCK", 0), RECORDING_MODE)
    if not stat.S_ISREG(os.fstat(descriptor).st_mode):
        os.close(descriptor)
        raise OSError(f"{path} is not a regular file")
    os.set_blocking(descriptor, True)
    return descriptor
