"""Every `pcache` command shown in the README and in docs/*.md runs, with the exit code its
command promises, and every Python example runs.

Convention: a command is a `$ ` line of a ```console block, run as written from the repository
root, except that the file after an output option (`-o`, `--output`, ...) is written to a
temporary folder. ```bash blocks show commands that need something else (vLLM, SGLang) and are
not run.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_pcache

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
TEXTS = {page.relative_to(ROOT).as_posix(): page.read_text() for page in PAGES}
README = TEXTS["README.md"]
OUTPUT_OPTIONS = {"-o", "--out", "--output", "--save-calibration", "--plot", "--write-fixed"}


def fenced_blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", text, flags=re.MULTILINE | re.DOTALL)


def console_commands(text: str) -> list[str]:
    """The `$ ` lines of the ```console blocks of one page."""
    return [
        line[2:]
        for block in fenced_blocks(text, "console")
        for line in block.splitlines()
        if line.startswith("$ ")
    ]


def local_arguments(words: list[str], folder: Path) -> list[str]:
    """The command's words with the file after each output option moved into `folder`."""
    moved = list(words)
    for index, word in enumerate(words[:-1]):
        if word in OUTPUT_OPTIONS and words[index + 1] != "-":
            moved[index + 1] = str(folder / Path(words[index + 1]).name)
    return moved


COMMANDS = sorted(
    {
        part.strip()
        for text in TEXTS.values()
        for line in console_commands(text)
        for part in line.split("&&")
        if part.strip().startswith("pcache ")
    }
)
# `pcache serve` and `--endpoint` commands need a running server: they run in
# tests/test_replay_endpoint.py::test_readme_serving_commands, against one
SERVING = [
    command for command in COMMANDS if command.startswith("pcache serve") or "--endpoint" in command
]
# `pcache watch` without --once runs until stopped: tests/test_watch.py runs it on a log
WATCHING = [
    command
    for command in COMMANDS
    if command.startswith("pcache watch") and "--once" not in command.split()
]
COMMANDS = [command for command in COMMANDS if command not in SERVING + WATCHING]
FINDINGS_EXIT = {"diff": {1}, "lint": {1}, "watch": {1}}


def test_readme_shows_commands():
    assert any(command.startswith("pcache diff") for command in COMMANDS)
    readme = console_commands(README)
    for command in ("pcache diff", "pcache lint samples/prompts", "pcache replay samples/traces/"):
        assert any(line.startswith(command) for line in readme), command


def test_readme_is_short_and_its_links_exist():
    assert len(README.splitlines()) <= 200
    for text in TEXTS.values():
        for target in re.findall(r"\]\((?!https?:)([^)#]+)", text):
            base = ROOT if text is README else ROOT / "docs"
            assert (base / target).exists(), target


def test_no_command_hides_outside_a_console_block():
    """A `$ pcache` line anywhere else (a plain fence, an indented block) would not be run."""
    for name, text in TEXTS.items():
        shown = set(re.findall(r"^\s*\$ (pcache .+)$", text, flags=re.MULTILINE))
        assert shown <= set(console_commands(text)), name


@pytest.mark.parametrize("command", COMMANDS)
def test_readme_command_runs(command, tmp_path):
    arguments = local_arguments(shlex.split(command)[1:], tmp_path)
    result = run_pcache(*arguments, timeout=300)
    expected = FINDINGS_EXIT.get(arguments[0], {0})
    if any("-clean" in argument for argument in arguments) or "--exit-zero" in arguments:
        expected = {0}  # the clean samples have nothing to report
    assert result.returncode in expected, result.stderr.decode()[-2000:]
    assert b"Traceback" not in result.stderr


# -- the README's Python ----------------------------------------------------------------------

pytest_plugins = ["pytester"]
PYTHON_BLOCKS = [block for text in TEXTS.values() for block in fenced_blocks(text, "python")]
TEST_FILE = re.compile(r"^# (test_\w+\.py)\n")


def test_readme_shows_python():
    assert any("pcache.diff(" in block for block in fenced_blocks(README, "python"))
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
