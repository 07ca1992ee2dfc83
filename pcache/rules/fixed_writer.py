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
        target = Path(path)
        if target.is_dir():
            raise UsageError(f"--write-fixed {path}: is a directory (give a .jsonl file)")
        folder = target.parent if str(target.parent) else Path(".")
        if not folder.is_dir():
            raise UsageError(f"--write-fixed {path}: no such directory {folder}")
        self.path = target
        descriptor, temporary = tempfile.mkstemp(prefix=".pcache-fixed-", dir=folder)
        self.temporary = temporary
        self.handle = os.fdopen(descriptor, "wb")

    def write(self, body: dict[str, Any]) -> None:
        self.handle.write(orjson.dumps(body) + b"\n")

    def commit(self) -> None:
        self.handle.close()
        os.replace(self.temporary, self.path)

    def abort(self) -> None:
        self.handle.close()
        Path(self.temporary).unlink(missing_ok=True)
