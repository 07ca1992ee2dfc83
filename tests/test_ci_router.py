""".ci/run's router step: after the main suite (and the vLLM step) it builds the router venv
in bounded time and runs the tests marked `router`; when it cannot, it says why and passes."""

from __future__ import annotations

import pytest

from tests.ci_suite_step import suite_step
from tests.test_ci import ci_copy  # noqa: F401  (the fixture)


@pytest.fixture
def ci(ci_copy, tmp_path):  # noqa: F811
    """`ci_copy` with a python stand-in that tells the router run from the others."""
    no_vllm = str(tmp_path / "no-vllm-venv")
    return suite_step(
        ci_copy, tmp_path, "router", "PCACHE_ROUTER_VENV", "ROUTER", PCACHE_VLLM_VENV=no_vllm
    )


def router_runs(log: str) -> list[str]:
    return [line for line in log.splitlines() if "-m router" in line]


def test_without_the_install_script_ci_says_so_and_passes(ci):
    run, _ = ci
    done, log = run()
    assert done.returncode == 0, done.stderr
    assert "the router tests did not run: bench/router/install.sh is missing" in done.stderr
    assert router_runs(log) == []


def test_a_failed_or_slow_install_is_named_and_ci_passes(ci):
    run, _ = ci
    done, log = run('echo "install.sh: cannot install sglang-router==0.3.2" >&2; exit 1')
    assert done.returncode == 0, done.stderr
    assert "did not run: install.sh: cannot install sglang-router==0.3.2" in done.stderr
    done, log = run("sleep 30", PCACHE_ROUTER_INSTALL_TIMEOUT="1")
    assert done.returncode == 0 and "installing sglang-router took more than 1 s" in done.stderr
    assert router_runs(log) == []


def test_a_built_venv_runs_the_router_tests_and_their_failure_fails_ci(ci):
    run, venv = ci
    done, log = run(f'mkdir -p "$1" && touch "$1/READY"; [[ $1 == {venv} ]]')
    assert done.returncode == 0, done.stderr
    assert router_runs(log) == [f"pytest -m pytest -q -m router tests/router venv={venv}"]
    done, _ = run(ROUTER_STATUS="1", ROUTER_OUTPUT="1 failed in 1.00s")
    assert done.returncode == 1 and "the tests behind the router failed" in done.stderr
