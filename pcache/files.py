"""The one place pcache opens a user's file, and writing files atomically.

Reading: only regular files (and `-`, standard input) are read, never more than a size limit,
so a FIFO, a device such as /dev/zero, a socket or a directory is a one-line error naming the
file instead of a hang or a process that grows until it dies.

Writing: a temporary file in the target's folder, then one rename, so a reader never sees half
a file and a failed write leaves the old file (or none) in place. A new file gets the mode any
new file gets under the user's umask (0666 & ~umask); a file replaced keeps its mode.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
import sys
from collections.abc import Iterable, Iterator
from typing import BinaryIO

from pcache.errors import InputError

MAX_INPUT_BYTES = 256 * 1024 * 1024
"""The most pcache reads of one file (or of standard input) as a whole."""
STDIN = "-"

_KINDS = (
    (stat.S_ISDIR, "is a directory"),
    (stat.S_ISFIFO, "is a FIFO (named pipe)"),
    (stat.S_ISCHR, "is a character device"),
    (stat.S_ISBLK, "is a block device"),
    (stat.S_ISSOCK, "is a socket"),
)


def display_name(path: str | os.PathLike[str]) -> str:
    return "<stdin>" if os.fspath(path) == STDIN else os.fspath(path)


def _mebibytes(size: int) -> str:
    return f"{size / 2**20:.0f} MiB"


def _os_failure(source: str, error: OSError) -> InputError:
    if isinstance(error, FileNotFoundError):
        return InputError(source, "no such file")
    if isinstance(error, PermissionError):
        return InputError(source, "permission denied")
    if isinstance(error, IsADirectoryError):
        return InputError(source, "is a directory, expected a file")
    return InputError(source, f"cannot read: {error.strerror or error}")


@contextlib.contextmanager
def open_input(
    path: str | os.PathLike[str], *, max_bytes: int | None = MAX_INPUT_BYTES, what: str = "file"
) -> Iterator[tuple[BinaryIO, int | None]]:
    """Open a regular file (or `-`) for binary reading: (stream, size in bytes or None).

    The file is opened without blocking (a FIFO with no writer cannot hang the open), then
    checked on its descriptor: anything but a regular file, or a file over `max_bytes`
    (None: no limit), is an `InputError` naming it. `what` names what was expected.
    """
    source = display_name(path)
    if os.fspath(path) == STDIN:
        stream = getattr(sys.stdin, "buffer", None)
        if stream is None or stream.closed:
            raise InputError(source, "standard input is closed")
        yield stream, None
        return
    try:
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as error:
        raise _os_failure(source, error) from None
    try:
        info = os.fstat(descriptor)
        for is_kind, kind in _KINDS:
            if is_kind(info.st_mode):
                raise InputError(source, f"{kind}, expected a regular {what}")
        if max_bytes is not None and info.st_size > max_bytes:
            raise InputError(
                source,
                f"is too large ({_mebibytes(info.st_size)} > {_mebibytes(max_bytes)});"
                " split it or use a .jsonl file",
            )
        if hasattr(os, "set_blocking"):
            os.set_blocking(descriptor, True)
        stream = os.fdopen(descriptor, "rb")
    except BaseException:
        os.close(descriptor)
        raise
    with stream:
        yield stream, info.st_size


def read_input(
    path: str | os.PathLike[str], *, max_bytes: int = MAX_INPUT_BYTES, what: str = "file"
) -> bytes:
    """The whole content of a regular file or of `-`, at most `max_bytes` of it."""
    source = display_name(path)
    with open_input(path, max_bytes=max_bytes, what=what) as (stream, _):
        try:
            data = stream.read(max_bytes + 1)
        except OSError as error:
            raise _os_failure(source, error) from None
    if len(data) > max_bytes:
        raise InputError(source, f"is larger than {_mebibytes(max_bytes)}")
    return data


def read_text(
    path: str | os.PathLike[str], *, max_bytes: int = MAX_INPUT_BYTES, what: str = "file"
) -> str:
    """`read_input` decoded as UTF-8 (a leading byte order mark is dropped)."""
    data = read_input(path, max_bytes=max_bytes, what=what)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line, column = line_and_column(data, error.start)
        raise InputError(
            display_name(path), "invalid UTF-8 (expected UTF-8 text)", line, column
        ) from None


def line_and_column(data: bytes, offset: int) -> tuple[int, int]:
    """1-based line and column (in bytes) of a byte offset."""
    line_start = data.rfind(b"\n", 0, offset) + 1
    return data.count(b"\n", 0, offset) + 1, offset - line_start + 1


def _check_target(path: str) -> bool:
    """Whether `path` is a character device (`/dev/null`, a terminal), written in place; any
    other kind but a regular file (a folder, a FIFO, a block device, a socket) is refused."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False  # missing (the write creates it) or unreachable (the write reports it)
    if stat.S_ISCHR(mode):
        return True
    for is_kind, kind in _KINDS:
        if is_kind(mode):
            raise InputError(path, f"{kind}, expected a regular file to write")
    return False


def check_writable(path: str) -> None:
    """Refuse, before any work, a path that cannot be written: neither a regular file nor a
    character device (a folder, a FIFO, a socket), or in a missing folder."""
    _check_target(path)
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise InputError(path, f"cannot write: no such directory {folder}")


def _create_temporary(target: str) -> tuple[int, str]:
    """A new, empty file beside `target` for writing: (descriptor, path). It is created with
    mode 0666, which the kernel masks with the umask, as for any new file (unlike
    `tempfile.mkstemp`, whose files are 0600)."""
    folder = os.path.dirname(os.path.abspath(target))
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        name = f".{os.path.basename(target)}.{secrets.token_hex(4)}.tmp"
        path = os.path.join(folder, name)
        try:
            return os.open(path, flags, 0o666), path
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name beside {target}")


def write_atomically(
    path: str | os.PathLike[str],
    chunks: Iterable[bytes],
    *,
    keep_mode: bool = True,
    durable: bool = False,
    failure: str = "cannot write",
) -> None:
    """Write `chunks` to `path` through a temporary file and a rename.

    A new file gets the mode a new file gets under the umask (0666 & ~umask); a file being
    replaced keeps its permission bits (`keep_mode=False`: it gets a new file's mode too).
    `durable` syncs the data to disk before the rename. Any OS error becomes one `InputError`
    naming `path`.
    """
    target = os.fspath(path)
    if _check_target(target):  # a device is never replaced: written through
        try:
            with open(target, "wb") as stream:
                for chunk in chunks:
                    stream.write(chunk)
        except OSError as error:
            raise InputError(target, f"{failure}: {error.strerror or error}") from None
        return
    temporary = None
    try:
        try:
            mode = os.stat(target).st_mode & 0o7777 if keep_mode else None
        except FileNotFoundError:
            mode = None  # a new file: the umask decides
        handle, temporary = _create_temporary(target)
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
