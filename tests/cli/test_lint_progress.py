"""The lint progress bar: on stderr for a person at a terminal, never on stdout, never for
machine formats or when stderr is not a terminal. stderr is a real pseudo-terminal here."""

from __future__ import annotations

import os
import pty
import subprocess
import sys

import pytest

from tests.conftest import ROOT, SAMPLES

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX pseudo-terminal")


def _lint_with_terminal_stderr(*args: str, terminal: bool = True) -> tuple[bytes, bytes]:
    """Run `pcache lint` with stderr on a pseudo-terminal (or a pipe); (stdout, stderr)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), TERM="xterm")
    env.pop("_TYPER_FORCE_DISABLE_TERMINAL", None)
    env.pop("NO_COLOR", None)
    command = [sys.executable, "-m", "pcache", "lint", *args]
    if not terminal:
        done = subprocess.run(command, capture_output=True, cwd=ROOT, env=env, timeout=120)
        return done.stdout, done.stderr
    controller, terminal_end = pty.openpty()
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=terminal_end, cwd=ROOT, env=env
    )
    os.close(terminal_end)
    stdout = process.stdout.read()
    stderr = b""
    while True:
        try:
            chunk = os.read(controller, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        stderr += chunk
    process.wait(timeout=120)
    os.close(controller)
    return stdout, stderr


def test_progress_goes_to_a_terminal_stderr_only():
    stdout, stderr = _lint_with_terminal_stderr(str(SAMPLES / "prompts"))
    assert b"linting" in stderr
    assert b"linting" not in stdout
    assert b"PC101" in stdout


@pytest.mark.parametrize("format", ["json", "sarif"])
def test_no_progress_for_machine_formats(format):
    stdout, stderr = _lint_with_terminal_stderr(str(SAMPLES / "prompts"), "--format", format)
    assert b"linting" not in stderr and b"linting" not in stdout
    assert stdout.lstrip().startswith(b"{")


def test_no_progress_when_stderr_is_not_a_terminal():
    stdout, stderr = _lint_with_terminal_stderr(str(SAMPLES / "prompts"), terminal=False)
    assert b"linting" not in stderr and b"linting" not in stdout
    assert b"PC101" in stdout, stderr
