"""Test environment: offline, no colour, fixed width, and helpers to run the CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "samples"

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ["TRANSFORMERS_VERBOSITY"] = "error"
os.environ["NO_COLOR"] = "1"
os.environ["COLUMNS"] = "120"
os.environ["TERMINAL_WIDTH"] = "120"
os.environ["_TYPER_FORCE_DISABLE_TERMINAL"] = "1"
os.environ.pop("PYTHONHASHSEED", None)  # vLLM reads it; tests pin the default seed


@pytest.fixture
def cli():
    """Run pcache in-process through typer's CliRunner: cli(*args, input=None) -> Result."""
    from typer.testing import CliRunner

    from pcache.cli.app import app

    runner = CliRunner()

    def invoke(*args: str, input: str | bytes | None = None):
        return runner.invoke(app, [str(a) for a in args], input=input)

    return invoke


def run_pcache(*args: str, input: bytes | None = None, cwd: Path | None = None, timeout=120):
    """Run `python -m pcache` in a subprocess (for exit codes, stdin and timing)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, "-m", "pcache", *map(str, args)],
        input=input,
        capture_output=True,
        cwd=cwd or ROOT,
        env=env,
        timeout=timeout,
    )
