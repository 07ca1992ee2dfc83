"""Writing the fixed log (`pcache lint --write-fixed OUT`): one request body per line, written
to a temporary file beside OUT and moved into place only once the whole log is written."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import orjson

from pcache.errors import UsageError


class FixedWriter:
    def __init__(self, path: str):
        folder = self.check(path)
        self.path = Path(path)
        try:
            descriptor, temporary = tempfile.mkstemp(prefix=".pcache-fixed-", dir=folder)
        except OSError as failure:
            raise UsageError(f"--write-fixed {path}: {failure.strerror}") from None
        self.temporary = temporary
        self.handle = os.fdopen(descriptor, "wb")

    @staticmethod
    def check(path: str) -> Path:
        """The folder `path` will be written in; a usage error when it cannot be."""
        target = Path(path)
        if target.is_dir():
            raise UsageError(f"--write-fixed {path}: is a directory (give a .jsonl file)")
        folder = target.parent if str(target.parent) else Path(".")
        if not folder.is_dir():
            raise UsageError(f"--write-fixed {path}: no such directory {folder}")
        if not os.access(folder, os.W_OK):
            raise UsageError(f"--write-fixed {path}: {folder} is not writable")
        return folder

    def write(self, body: dict[str, Any]) -> None:
        try:
            self.handle.write(orjson.dumps(body) + b"\n")
        except OSError as failure:
            raise UsageError(f"--write-fixed {self.path}: {failure.strerror}") from None

    def commit(self) -> None:
        self.handle.close()
        try:
            os.replace(self.temporary, self.path)
        except OSError as failure:
            self.abort()
            raise UsageError(f"--write-fixed {self.path}: {failure.strerror}") from None

    def abort(self) -> None:
        self.handle.close()
        Path(self.temporary).unlink(missing_ok=True)
