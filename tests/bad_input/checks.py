"""What every bad input must get: one line on stderr naming the file, exit 2, no traceback,
and every input file byte-identical afterwards (mtime too)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path


def assert_one_line_error(result, *fragments: object, code: int = 2) -> str:
    """`result` (CliRunner's or subprocess's) failed with one `pcache: error:` line."""
    exit_code = getattr(result, "exit_code", getattr(result, "returncode", None))
    stderr = result.stderr if isinstance(result.stderr, str) else result.stderr.decode()
    output = getattr(result, "output", "") or ""
    assert exit_code == code, (exit_code, stderr, output)
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    line = lines[0]
    assert line.startswith("pcache: error: "), line
    for text in (stderr, output):
        assert "Traceback" not in text and "internal error" not in text, text
    assert "NoneType" not in line and "<class" not in line, line
    for fragment in fragments:
        assert str(fragment) in line, (fragment, line)
    return line


def assert_no_crash(result) -> None:
    """Whatever the outcome, never a traceback or an internal error; errors are one line."""
    exit_code = getattr(result, "exit_code", getattr(result, "returncode", None))
    stderr = result.stderr if isinstance(result.stderr, str) else result.stderr.decode()
    assert "Traceback" not in stderr and "internal error" not in stderr, stderr
    assert exit_code in (0, 1, 2), (exit_code, stderr)
    if exit_code == 2:
        errors = [line for line in stderr.splitlines() if line.startswith("pcache: error: ")]
        assert len(errors) == 1, stderr


def _state(paths: list[Path]) -> dict[Path, tuple[bytes, int]]:
    state = {}
    for path in paths:
        if path.is_file() and not path.is_symlink():
            state[path] = (path.read_bytes(), os.stat(path).st_mtime_ns)
    return state


@contextlib.contextmanager
def unchanged(folder: Path) -> Iterator[None]:
    """Every file under `folder` keeps its bytes and its mtime, and none appears."""
    before = _state(sorted(folder.rglob("*")))
    yield
    after = _state(sorted(folder.rglob("*")))
    assert after == before, sorted(set(after) ^ set(before)) or "a file changed"
