"""A real router (PyPI `sglang-router` 0.3.2) in front of two `pcache serve --model tiny`
replicas, all on loopback free ports, stopped by PID when the module ends.

The router's venv is `bench/router/install.sh`'s, named by `PCACHE_ROUTER_VENV`; without it
(or when it is not complete) every test here is skipped, so the default test run never starts
a router.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest

VENV_VARIABLE = "PCACHE_ROUTER_VENV"


def router_venv() -> Path | str:
    """The venv, or why there is none."""
    value = os.environ.get(VENV_VARIABLE)
    if not value:
        return f"{VENV_VARIABLE} is not set (bench/router/install.sh VENV builds one)"
    venv = Path(value)
    if not (venv / "READY").is_file():
        return f"{VENV_VARIABLE}={venv} is not a complete router venv (no READY)"
    return venv


def pytest_collection_modifyitems(config, items):
    venv = router_venv()
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.router)
            if isinstance(venv, str):
                item.add_marker(pytest.mark.skip(reason=venv))


@contextlib.contextmanager
def router(policy: str, workers: list[str], log: Path):
    """The base URL of `sglang_router.launch_router --policy POLICY` over `workers`."""
    from bench.router.compare import router as launch_router

    venv = router_venv()
    assert not isinstance(venv, str), venv
    with launch_router(venv, policy, workers, log) as (url, _listed):
        yield url


@pytest.fixture(scope="module")
def replicas():
    """Two `pcache serve --model tiny` replicas (base URLs, no /v1)."""
    from tests.serve_helpers import serve_process

    with serve_process("--model", "tiny") as first, serve_process("--model", "tiny") as second:
        yield [first, second]
