""".ci/run's router step: after the main suite (and the vLLM step) it builds the router venv
in bounded time and runs the tests marked `router`; when it cannot, it says why and passes."""

from __future__ import annotations

import pytest

from tests.test_ci import ci_copy  # noqa: F401  (the fixture)

FAKE_PYTHON = """#!/usr/bin/env bash
case "$*" in
  "-m pip install"*) exit 0 ;;
  "-c "*) echo "" ;;
  "-m pytest"*) echo "pytest $* venv=${PCACHE_ROUTER_VENV:-unset}" >>"$LOG"
    if [[ "$*" == *"-m router"* ]]; then echo "${ROUTER_OUTPUT:-2 passed in 1.00s}"
        exit "${ROUTER_STATUS:-0}"; fi
    echo "3 passed in 0.01s" ;;
  *) exit 99 ;;
esac
"""


@pytest.fixture
def ci(ci_copy, tmp_path):  # noqa: F811
    (tmp_path / "bin" / "python").write_text(FAKE_PYTHON)
    venv = tmp_path / "router-venv"

    def run(install: str | None = None, **env):
        if install is not None:
            script = tmp_path / "bench" / "router" / "install.sh"
            script.parent.mkdir(parents=True, exist_ok=True)
            script.write_text(f"#!/usr/bin/env bash\n{install}\n")
            script.chmod(0o755)
        no_vllm = str(tmp_path / "no-vllm-venv")
        return ci_copy(PCACHE_ROUTER_VENV=str(venv), PCACHE_VLLM_VENV=no_vllm, **env)

    return run, venv


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
    assert done.returncode == 0 and "installing took more than 1 s" in done.stderr
    assert router_runs(log) == []


def test_a_built_venv_runs_the_router_tests_and_their_failure_fails_ci(ci):
    run, venv = ci
    done, log = run(f'mkdir -p "$1" && touch "$1/READY"; [[ $1 == {venv} ]]')
    assert done.returncode == 0, done.stderr
    assert router_runs(log) == [f"pytest -m pytest -q -m router tests/router venv={venv}"]
    done, _ = run(ROUTER_STATUS="1", ROUTER_OUTPUT="1 failed in 1.00s")
    assert done.returncode == 1 and "the tests behind the router failed" in done.stderr
