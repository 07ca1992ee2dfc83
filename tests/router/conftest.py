"""A real router (PyPI `sglang-router` 0.3.2) in front of two `pcache serve --model tiny`
replicas, all on loopback free ports, stopped by PID when the module ends.

The router's venv is `bench/router/install.sh`'s, named by `PCACHE_ROUTER_VENV`; without it
(or when it is not complete) every test here is skipped, so the default test run never starts
a router.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from tests.venv_marks import mark_suite, suite_venv

VENV_VARIABLE = "PCACHE_ROUTER_VENV"


def router_venv() -> Path | str:
    """The venv, or why there is none."""
    return suite_venv(VENV_VARIABLE, "bench/router/install.sh", "router")


def pytest_collection_modifyitems(config, items):
    mark_suite(items, Path(__file__).parent, "router", router_venv())


@contextlib.contextmanager
def router(policy: str, workers: list[str], log: Path):
    """The base URL of `sglang_router.launch_router --policy POLICY` over `workers`."""
    from bench.router.compare import router as launch_router

    venv = router_venv()
    assert not isinstance(venv, str), venv
    with launch_router(venv, policy, workers, log) as (url, _listed):
        yield url


def reset(replicas) -> None:
    """Empties each replica's prefix cache."""
    import httpx

    for url in replicas:
        assert httpx.post(f"{url}/reset_prefix_cache", timeout=10).status_code == 200


@pytest.fixture(scope="module")
def replicas():
    """Two `pcache serve --model tiny` replicas (base URLs, no /v1)."""
    from tests.serve_helpers import serve_process

    with serve_process("--model", "tiny") as first, serve_process("--model", "tiny") as second:
        yield [first, second]
