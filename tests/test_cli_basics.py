"""The command line's start-up: light imports, and defaults that agree with the core's."""

from __future__ import annotations

import subprocess
import sys

from pcache.cache.hashing import DEFAULT_BLOCK_SIZE, DEFAULT_HASH_ALGO
from pcache.cli import options
from pcache.models import DEFAULT_MODEL
from pcache.prompt.renderers.interface import DEFAULT_DATE
from pcache.prompt.renderers.render import DEFAULT_TOKENIZER
from tests.conftest import ROOT

HEAVY = ("numpy", "torch", "transformers", "tiktoken", "triton", "matplotlib", "jinja2", "ray")


def test_cli_defaults_are_the_core_defaults():
    assert options.DEFAULT_TOKENIZER == DEFAULT_TOKENIZER
    assert options.DEFAULT_BLOCK_SIZE == DEFAULT_BLOCK_SIZE
    assert options.DEFAULT_HASH_ALGO == DEFAULT_HASH_ALGO
    assert options.DEFAULT_DATE == DEFAULT_DATE
    assert options.DEFAULT_MODEL == DEFAULT_MODEL


def test_help_of_every_command_imports_nothing_heavy():
    for command in ([], ["hash"], ["diff"], ["lint"], ["replay"], ["generate"], ["trace", "synth"]):
        done = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "pcache", *command, "--help"],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()}
        assert not imported & set(HEAVY), (command, sorted(imported & set(HEAVY)))
        assert "Example: pcache " in done.stdout, command
