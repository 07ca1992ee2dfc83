"""Findings a change introduced: the same files linted as they were at a git revision.

A current finding is new unless the revision's files had one of the same rule at the same JSON
path of the same file (counted: two findings where the revision had one leaves one new). Line
numbers do not take part, so requests added above a finding do not make it new. Files that
did not exist at the revision have only new findings.
"""

from __future__ import annotations

import subprocess
from collections import Counter
from pathlib import Path

from pcache.errors import UsageError
from pcache.rules.base import Diagnostic


def _git(*args: str, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(["git", *args], cwd=cwd, capture_output=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise UsageError(f"--diff needs git: {error}") from None


def repository_root(start: Path) -> Path:
    done = _git("rev-parse", "--show-toplevel", cwd=start)
    if done.returncode != 0:
        raise UsageError(f"--diff needs a git repository; {start} is not in one")
    return Path(done.stdout.decode().strip()).resolve()


def files_at_revision(revision: str, files: list[str], root: Path, into: Path) -> list[str]:
    """Write each of `files` as it was at `revision` under `into`, at its path relative to the
    repository `root`; files the revision does not have are left out."""
    if _git("rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}", cwd=root).returncode:
        raise UsageError(f"--diff: unknown revision {revision!r}")
    written = []
    for file in files:
        relative = _relative(Path(file), root)
        done = _git("show", f"{revision}:{relative}", cwd=root)
        if done.returncode != 0:
            continue  # added since the revision
        target = into / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(done.stdout)
        written.append(str(target))
    return written


def _relative(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root).as_posix()
    except ValueError:
        raise UsageError(f"--diff: {path} is outside the repository {root}") from None


def introduced(
    current: list[Diagnostic], base: list[Diagnostic], root: Path, base_root: Path
) -> list[Diagnostic]:
    """The findings of `current` (files under `root`) that `base` (under `base_root`) lacks."""
    seen = Counter((_relative(Path(d.file), base_root), d.code, d.json_path) for d in base)
    new = []
    for diagnostic in current:
        key = (_relative(Path(diagnostic.file), root), diagnostic.code, diagnostic.json_path)
        if seen[key] > 0:
            seen[key] -= 1
        else:
            new.append(diagnostic)
    return new
