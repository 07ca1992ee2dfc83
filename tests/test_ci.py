""".ci/run runs the test command README.md's Quick start shows, and fails unless a test passed."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess

import pytest

from tests.conftest import ROOT

CI = (ROOT / ".ci" / "run").read_text()
README = (ROOT / "README.md").read_text()


def quick_start_commands(readme: str) -> list[str]:
    """The `$ ` lines of the Quick start's ```console blocks."""
    section = readme.split("\n## Quick start\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"^```console\n(.*?)^```", section, flags=re.MULTILINE | re.DOTALL)
    return [line[2:] for block in blocks for line in block.splitlines() if line.startswith("$ ")]


def readme_test_command() -> list[str]:
    (line,) = [command for command in quick_start_commands(README) if "pytest" in command]
    return shlex.split(line)


def ci_test_command() -> list[str]:
    (words,) = re.findall(r"^TESTS=\((.*)\)", CI, flags=re.MULTILINE)
    return shlex.split(words)


def test_the_readme_and_ci_run_the_same_test_command():
    assert readme_test_command() == ci_test_command()
    assert ci_test_command()[:3] == ["python", "-m", "pytest"]


def test_ci_calls_pytest_itself_and_never_hides_a_failed_install():
    assert '"${TESTS[@]}"' in CI
    assert not re.search(r"\bsed\b", CI) and "bash -c" not in CI
    assert "|| true" not in CI
    assert "torch==2.13.0+cpu" in CI  # the local label: no CUDA build satisfies the pin


# -- .ci/run's own logic, with stand-ins for python (pip, torch and pytest) ------------------

FAKE_PYTHON = """#!/usr/bin/env bash
case "$*" in
  "-m pip install"*) echo "pip $*" >>"$LOG"
    if [[ -n ${PIP_FAILS_ON:-} && "$*" == *"$PIP_FAILS_ON"* ]]; then exit 1; fi
    if [[ -n ${PIP_NEEDS_INDEX:-} && "$*" == *torch==* && "$*" != *--index-url* ]]; then exit 1; fi
    exit "${PIP_STATUS:-0}" ;;
  "-c "*) echo "${CUDA:-}" ;;
  "-m pytest"*) echo "pytest $*" >>"$LOG"; printf '%b\\n' "$PYTEST_OUTPUT"; exit "$PYTEST_STATUS" ;;
  *) exit 99 ;;
esac
"""


@pytest.fixture
def ci_copy(tmp_path):
    """A copy of .ci/run and README.md whose `python` and `chromium` are stand-ins."""
    if shutil.which("bash") is None:
        pytest.skip("needs bash")
    (tmp_path / ".ci").mkdir()
    shutil.copy(ROOT / ".ci" / "run", tmp_path / ".ci" / "run")
    (tmp_path / "README.md").write_text(README)
    bin_folder = tmp_path / "bin"
    bin_folder.mkdir()
    (bin_folder / "python").write_text(FAKE_PYTHON)
    (bin_folder / "chromium").write_text("#!/bin/sh\n")
    for stand_in in bin_folder.iterdir():
        stand_in.chmod(0o755)

    def run(pytest_output="3 passed in 0.01s", pytest_status=0, **env):
        environment = {
            "PATH": f"{bin_folder}:/usr/bin:/bin",
            "LOG": str(tmp_path / "log"),
            "PYTEST_OUTPUT": pytest_output,
            "PYTEST_STATUS": str(pytest_status),
            "PCACHE_TORCH_WHEELS": str(tmp_path / "no-wheels"),
            **env,
        }
        done = subprocess.run(
            ["bash", str(tmp_path / ".ci" / "run")],
            env=environment,
            capture_output=True,
            text=True,
            timeout=60,
        )
        log = (tmp_path / "log").read_text() if (tmp_path / "log").exists() else ""
        return done, log

    return run


def test_ci_passes_when_tests_pass(ci_copy):
    done, log = ci_copy()
    assert done.returncode == 0, done.stderr
    assert "pip -m pip install -q -c" in log and "torch==2.13.0+cpu" in log
    assert "--index-url" not in log  # pip's configured sources had it
    assert "pytest -m pytest -q -n 2" in log


def test_ci_falls_back_to_pytorchs_cpu_index(ci_copy):
    done, log = ci_copy(PIP_NEEDS_INDEX="1")
    assert done.returncode == 0, done.stderr
    assert "--index-url https://download.pytorch.org/whl/cpu torch==2.13.0+cpu" in log


def test_ci_fails_when_the_readme_lost_the_test_line(ci_copy, tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(readme.read_text().replace("$ python -m pytest -q -n 2\n", ""))
    done, log = ci_copy()
    assert done.returncode == 1
    assert "does not show the test command" in done.stderr
    assert log == ""  # nothing installed, nothing run


@pytest.mark.parametrize(
    ("output", "status", "message"),
    [
        ("no tests ran in 0.01s", 5, "collected no test"),
        ("12 deselected in 0.10s", 5, "collected no test"),
        ("4 skipped in 0.10s", 0, "no test passed"),
        ("", 0, "no test passed"),
        ("1 failed, 3 passed in 0.10s", 1, "tests failed"),
    ],
)
def test_ci_fails_unless_a_test_passed(ci_copy, output, status, message):
    done, _ = ci_copy(pytest_output=output, pytest_status=status)
    assert done.returncode == 1 and message in done.stderr, done.stderr


def test_ci_fails_loudly_when_torch_cannot_be_installed(ci_copy):
    done, log = ci_copy(PIP_STATUS="1")
    assert done.returncode == 1
    assert "cannot install torch==2.13.0+cpu" in done.stderr
    assert "pytest" not in log


def test_ci_refuses_a_cuda_build_of_torch(ci_copy):
    done, log = ci_copy(CUDA="12.8")
    assert done.returncode == 1 and "CUDA build" in done.stderr
    assert "pytest" not in log


def test_ci_takes_torch_from_a_folder_of_wheels_or_a_given_index(ci_copy, tmp_path):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    (wheels / "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl").write_bytes(b"")
    done, log = ci_copy(PCACHE_TORCH_WHEELS=str(wheels))
    assert done.returncode == 0, done.stderr
    assert f"--find-links {wheels} torch==2.13.0+cpu" in log
    done, log = ci_copy(PCACHE_TORCH_WHEELS=str(wheels), PCACHE_TORCH_INDEX="file:///mirror")
    assert done.returncode == 0, done.stderr
    assert "--index-url file:///mirror torch==2.13.0+cpu" in log


def test_ci_installs_ray_and_goes_on_without_it(ci_copy):
    done, log = ci_copy()
    assert done.returncode == 0, done.stderr
    assert "-e .[ray]" in log and "ray not installed" not in done.stderr
    done, log = ci_copy(PIP_FAILS_ON=".[ray]")
    assert done.returncode == 0, done.stderr
    assert "ray not installed: the --executor ray tests will be skipped" in done.stderr
    assert "pytest -m pytest -q -n 2" in log
