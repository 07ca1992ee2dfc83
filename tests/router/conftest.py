"""A real router (PyPI `sglang-router` 0.3.2) in front of two `pcache serve --model tiny`
replicas, all on loopback free ports, stopped by PID when the module ends.

The router's venv is `bench/router/install.sh`'s, named by `PCACHE_ROUTER_VENV`; without it
(or when it is not complete) every test here is skipped, so the default test run never starts
a router.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

VENV_VARIABLE = "PCACHE_ROUTER_VENV"
START_TIMEOUT_S = 60


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


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_for_workers(url: str, count: int, child: subprocess.Popen) -> None:
    import httpx

    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        assert child.poll() is None, "the router exited"
        with contextlib.suppress(httpx.HTTPError, ValueError):
            workers = httpx.get(f"{url}/workers", timeout=2).json().get("workers", [])
            if sum(1 for worker in workers if worker.get("is_healthy")) == count:
                return
        time.sleep(0.2)
    raise AssertionError(f"the router at {url} never listed {count} healthy workers")


@contextlib.contextmanager
def router(policy: str, workers: list[str], log: Path):
    """The base URL of `sglang_router.launch_router --policy POLICY` over `workers`."""
    venv = router_venv()
    assert not isinstance(venv, str), venv
    port = free_port()
    command = [
        str(venv / "bin" / "python"), "-m", "sglang_router.launch_router",
        "--host", "127.0.0.1", "--port", str(port),
        "--prometheus-host", "127.0.0.1", "--prometheus-port", str(free_port()),
        "--policy", policy, "--worker-urls", *workers,
    ]  # fmt: skip
    with log.open("wb") as sink:
        child = subprocess.Popen(
            command, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for_workers(url, len(workers), child)
        yield url
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGTERM)
        try:
            child.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait(timeout=10)


@pytest.fixture(scope="module")
def replicas():
    """Two `pcache serve --model tiny` replicas (base URLs, no /v1)."""
    from tests.serve_helpers import serve_process

    with serve_process("--model", "tiny") as first, serve_process("--model", "tiny") as second:
        yield [first, second]
