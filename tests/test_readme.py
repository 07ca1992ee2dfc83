"""Every `pcache` command shown in the README runs, with the exit code its command promises."""

from __future__ import annotations

import re
import shlex

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
