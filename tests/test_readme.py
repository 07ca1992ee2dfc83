"""Every `pcache` command shown in the README runs, with the exit code its command promises."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys

import pytest

from tests.conftest import ROOT, run_pcache

README = (ROOT / "README.md").read_text()
COMMANDS = sorted(
    {
        part.strip()
        for line in re.findall(r"^\s*\$ (.+)$", README, flags=re.MULTILINE)
        for part in line.split("&&")
        if part.strip().startswith("pcache ")
    }
)
FINDINGS_EXIT = {"diff": {1}, "lint": {1}}


def test_readme_shows_commands():
    assert any(command.startswith("pcache diff") for command in COMMANDS)


@pytest.mark.parametrize("command", COMMANDS)
def test_readme_command_runs(command, tmp_path):
    arguments = shlex.split(command)[1:]
    arguments = [
        str(tmp_path / a.removeprefix("$TMP/")) if a.startswith("$TMP/") else a for a in arguments
    ]
    result = run_pcache(*arguments, timeout=300)
    expected = FINDINGS_EXIT.get(arguments[0], {0})
    if any("-clean" in argument for argument in arguments):
        expected = {0}  # the clean samples have nothing to report
    assert result.returncode in expected, result.stderr.decode()[-2000:]
    assert b"Traceback" not in result.stderr


# -- the README's Python ----------------------------------------------------------------------

pytest_plugins = ["pytester"]
PYTHON_BLOCKS = re.findall(r"```python\n(.*?)```", README, flags=re.DOTALL)
TEST_FILE = re.compile(r"^# (test_\w+\.py)\n")


def test_readme_shows_python():
    assert any("pcache.diff(" in block for block in PYTHON_BLOCKS)
    assert any(TEST_FILE.match(block) for block in PYTHON_BLOCKS)


@pytest.mark.parametrize(
    "block", [b for b in PYTHON_BLOCKS if not TEST_FILE.match(b)], ids=lambda b: b.split("\n")[0]
)
def test_readme_python_runs(block, tmp_path):
    """Each example runs as a script in a fresh interpreter (SDK keys are dummies: no request
    leaves the process)."""
    script = tmp_path / "example.py"
    script.write_text(block)
    env = dict(os.environ, PYTHONPATH=str(ROOT), OPENAI_API_KEY="test", ANTHROPIC_API_KEY="test")
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, timeout=300
    )
    assert done.returncode == 0, done.stderr.decode()[-2000:]


@pytest.mark.parametrize("block", [b for b in PYTHON_BLOCKS if TEST_FILE.match(b)])
def test_readme_pytest_example_passes(block, pytester):
    name = TEST_FILE.match(block).group(1)
    pytester.makepyfile(**{name.removesuffix(".py"): block})
    result = pytester.runpytest("-p", "no:pcache", "-p", "pcache.record.pytest_plugin")
    result.assert_outcomes(passed=1)
