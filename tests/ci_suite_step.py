""".ci/run's steps that build a suite's venv with bench/SUITE/install.sh and run the tests
marked SUITE in it, driven through `tests.test_ci.ci_copy` with a `python` stand-in that
tells that run from the main one."""

from __future__ import annotations

from pathlib import Path

FAKE_PYTHON = """#!/usr/bin/env bash
case "$*" in
  "-m pip install"*) exit 0 ;;
  "-c "*) echo "" ;;
  "-m pytest"*) echo "pytest $* venv=${VARIABLE:-unset}" >>"$LOG"
    if [[ "$*" == *"-m MARKER"* ]]; then echo "${PREFIX_OUTPUT:-2 passed in 1.00s}"
        exit "${PREFIX_STATUS:-0}"; fi
    echo "3 passed in 0.01s" ;;
  *) exit 99 ;;
esac
"""
"""`python`: pip and `-c` succeed; pytest logs its arguments and the venv VARIABLE names;
the `-m MARKER` run prints PREFIX_OUTPUT and exits with PREFIX_STATUS."""


def suite_step(ci_copy, tmp_path: Path, suite: str, variable: str, prefix: str, **fixed_env):
    """`(run, venv)`: `run(install=None, **env)` runs the copy of .ci/run with `variable` set
    to `venv` (and `fixed_env`), bench/SUITE/install.sh being `install` when given."""
    fake = FAKE_PYTHON.replace("VARIABLE", variable).replace("MARKER", suite)
    (tmp_path / "bin" / "python").write_text(fake.replace("PREFIX", prefix))
    venv = tmp_path / f"{suite}-venv"

    def run(install: str | None = None, **env):
        if install is not None:
            script = tmp_path / "bench" / suite / "install.sh"
            script.parent.mkdir(parents=True, exist_ok=True)
            script.write_text(f"#!/usr/bin/env bash\n{install}\n")
            script.chmod(0o755)
        return ci_copy(**{variable: str(venv)}, **fixed_env, **env)

    return run, venv
