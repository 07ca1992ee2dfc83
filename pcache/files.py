"""Writing files atomically: a temporary file in the target's folder, then one rename.

A reader never sees half a file, and a failed write leaves the old file (or none) in place.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable

from pcache.errors import InputError


def check_writable(path: str) -> None:
    """Refuse, before any work, a path that cannot be written: a folder, or a missing folder."""
    if os.path.isdir(path):
        raise InputError(path, "is a directory, expected a file to write")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise InputError(path, f"cannot write: no such directory {folder}")


def write_atomically(
    path: str | os.PathLike[str],
    chunks: Iterable[bytes],
    *,
    keep_mode: bool = False,
    durable: bool = False,
    failure: str = "cannot write",
) -> None:
    """Write `chunks` to `path` through a temporary file and a rename.

    `keep_mode` keeps the permissions of the file being replaced; `durable` syncs the data to
    disk before the rename. Any OS error becomes one `InputError` naming `path`.
    """
    target = os.fspath(path)
    if os.path.isdir(target):
        raise InputError(target, "is a directory, expected a file to write")
    folder = os.path.dirname(os.path.abspath(target))
    temporary = None
    try:
        mode = os.stat(target).st_mode & 0o7777 if keep_mode else None
        handle, temporary = tempfile.mkstemp(
            dir=folder, prefix=f".{os.path.basename(target)}.", suffix=".tmp"
        )
        with os.fdopen(handle, "wb") as stream:
            for chunk in chunks:
                stream.write(chunk)
            if durable:
                stream.flush()
                os.fsync(stream.fileno())
        if mode is not None:
            os.chmod(temporary, mode)
        os.replace(temporary, target)
    except OSError as error:
        raise InputError(target, f"{failure}: {error.strerror or error}") from None
    finally:
        if temporary is not None and os.path.exists(temporary):
            os.unlink(temporary)
