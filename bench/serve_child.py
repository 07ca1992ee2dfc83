"""A `pcache serve` child for the bench scripts: loopback, a free port, its URL from the banner."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def start_server(*arguments: str, drain_stderr: bool = False) -> tuple[subprocess.Popen, str]:
    """`python -m pcache serve --port 0 ARGUMENTS` and its base URL; the caller stops it by PID.

    With `drain_stderr` a thread reads the child's log after the banner so it never blocks."""
    child = subprocess.Popen(
        [sys.executable, "-m", "pcache", "serve", "--port", "0", *arguments],
        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )  # fmt: skip
    assert child.stderr is not None
    banner = child.stderr.readline()
    match = re.search(r"on (http://127\.0\.0\.1:\d+)/v1", banner)
    if match is None:
        child.kill()
        raise SystemExit(f"pcache serve did not start: {banner.strip()}")
    if drain_stderr:
        threading.Thread(target=lambda: [None for _ in child.stderr], daemon=True).start()
    return child, match.group(1)


def stop_server(child: subprocess.Popen) -> None:
    """Stop a server child by its PID: SIGTERM, then SIGKILL after 20 s."""
    child.terminate()
    try:
        child.wait(timeout=20)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait(timeout=10)
