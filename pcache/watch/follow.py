"""Follow a growing log, or a directory of rotating logs, without holding a file open.

Each `poll` stats the path, opens each file that grew, seeks to where the last poll stopped,
reads the complete lines there (a last line without its newline waits for the next poll) and
closes the file: a writer can rotate, truncate or delete it at any time.

Files are known by their inode, not their name. A log renamed away (`app.jsonl` ->
`app.jsonl.1`) is found in its directory by its inode and its tail read before the new file at
the path is read from its start; a file smaller than what was read of it was truncated (or
copied and truncated) and is read again from its start. A directory is followed as the set of
its log files (`.jsonl`, `.ndjson`, also rotated names such as `app.jsonl.1`; not hidden,
not compressed), each from where it was left, the least recently written first; a file
rotated by copying it (logrotate's `copytruncate`) is a new file there, read in full.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

LOG_MARKS = (".jsonl", ".ndjson")
"""A file of a followed directory is a log when its name holds one of these."""
SKIPPED_SUFFIXES = (".gz", ".bz2", ".xz", ".zst", ".zip", ".tmp", ".swp")
READ_BYTES = 4 * 2**20
"""Bytes read from a file per poll (a poll that stops there is followed at once; a longer
line is read whole)."""
MAX_LINE_BYTES = 64 * 2**20
"""A line longer than this is skipped (reported as unreadable)."""


@dataclass(slots=True)
class Line:
    """One complete line read from a log."""

    source: str
    number: int
    """Its line number in its file (1 for the first line the file ever had, when the follower
    saw the file from its start)."""
    raw: bytes


@dataclass(slots=True)
class _Position:
    name: str
    offset: int = 0
    line: int = 0
    skipping: bool = False
    """Inside a line longer than `MAX_LINE_BYTES`: drop bytes up to its end."""


@dataclass(slots=True)
class Poll:
    """What one poll read and saw."""

    lines: list[Line] = field(default_factory=list)
    too_long: list[tuple[str, int]] = field(default_factory=list)
    """(file, line) of lines longer than `MAX_LINE_BYTES`, skipped."""
    more: bool = False
    """A file holds more than this poll read: poll again at once."""
    missing: bool = False
    """The path does not exist (yet)."""


@dataclass(slots=True)
class FollowStats:
    bytes_read: int = 0
    lines_read: int = 0
    rotations: int = 0
    truncations: int = 0
    files: int = 0
    """Files read from so far."""


class Follower:
    """Reads what was appended to `path` (a file or a directory) since the last poll."""

    def __init__(self, path: str | os.PathLike[str], read_bytes: int = READ_BYTES):
        self.path = Path(path)
        self.read_bytes = read_bytes
        self.known: dict[tuple[int, int], _Position] = {}
        """Each file followed, by (device, inode)."""
        self.stats = FollowStats()

    @property
    def is_directory(self) -> bool:
        return self.path.is_dir()

    def poll(self) -> Poll:
        poll = Poll()
        try:
            if self.path.is_dir():
                self._poll_directory(poll)
            else:
                self._poll_file(poll)
        except FileNotFoundError:
            poll.missing = True
        return poll

    def _poll_file(self, poll: Poll) -> None:
        try:
            now = os.stat(self.path)
        except FileNotFoundError:
            poll.missing = True
            now = None
        key = (now.st_dev, now.st_ino) if now is not None else None
        for old in [old for old in self.known if old != key]:  # rotated away
            moved = self._find(old)
            if moved is not None:
                self._read(old, moved, poll)
            if not poll.more:
                del self.known[old]
                self.stats.rotations += 1
        if key is None or poll.more:
            return
        if key not in self.known:
            self.known[key] = _Position(str(self.path))
            self.stats.files += 1
        self._read(key, self.path, poll)

    def _find(self, key: tuple[int, int]) -> Path | None:
        """The file of `key` in the followed file's directory (renamed by rotation)."""
        try:
            entries = list(os.scandir(self.path.parent))
        except OSError:
            return None
        for entry in entries:
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if (info.st_dev, info.st_ino) == key and stat.S_ISREG(info.st_mode):
                return Path(entry.path)
        return None

    def _poll_directory(self, poll: Poll) -> None:
        found = []
        for entry in os.scandir(self.path):
            name = entry.name
            if name.startswith(".") or name.endswith(SKIPPED_SUFFIXES):
                continue
            if not any(mark in name for mark in LOG_MARKS):
                continue
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISREG(info.st_mode):
                found.append((info.st_mtime_ns, name, (info.st_dev, info.st_ino), entry.path))
        present = {key for _, _, key, _ in found}
        for gone in [key for key in self.known if key not in present]:
            del self.known[gone]
        for _, _, key, path in sorted(found):
            position = self.known.get(key)
            if position is None:
                self.known[key] = _Position(path)
                self.stats.files += 1
            elif position.name != path:
                position.name = path
                self.stats.rotations += 1
            self._read(key, Path(path), poll)
            if poll.more:
                return

    def _read(self, key: tuple[int, int], path: Path, poll: Poll) -> None:
        """The complete lines appended to the file since its position (opened, read from
        there and closed again)."""
        position = self.known[key]
        size = self.read_bytes
        try:
            with open(path, "rb") as handle:
                info = os.fstat(handle.fileno())
                if (info.st_dev, info.st_ino) != key:
                    return  # replaced between the stat and the open: the next poll sees it
                if info.st_size < position.offset:
                    position.offset, position.line, position.skipping = 0, 0, False
                    self.stats.truncations += 1
                while True:
                    handle.seek(position.offset)
                    data = handle.read(size)
                    if b"\n" in data or len(data) < size or size > MAX_LINE_BYTES:
                        break
                    size *= 4  # a line longer than one read
        except FileNotFoundError:
            return
        end = data.rfind(b"\n")
        if end < 0:
            if len(data) == size:  # no line end in MAX_LINE_BYTES: skip to the next one
                position.offset += len(data)
                position.skipping = True
                poll.more = True
            return
        chunk = data[: end + 1]
        position.offset += len(chunk)
        self.stats.bytes_read += len(chunk)
        poll.more = poll.more or len(data) == size  # stopped at the read's size, not the end
        lines = chunk.split(b"\n")[:-1]
        if position.skipping:
            position.skipping = False
            position.line += 1
            poll.too_long.append((str(path), position.line))
            lines = lines[1:]
        for raw in lines:
            position.line += 1
            if raw.strip():
                poll.lines.append(Line(str(path), position.line, raw))
                self.stats.lines_read += 1
