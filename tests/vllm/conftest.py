"""One real vLLM (CPU build) for the session, on loopback, and the model directory it serves.

The venv is `bench/vllm/install.sh`'s, named by `PCACHE_VLLM_VENV`; without it (or when it is
not complete) every test here is skipped, so the default test run never starts vLLM. vLLM is
started once, on a free port, waits at most `PCACHE_VLLM_START_TIMEOUT` seconds (600) to be
healthy, and is stopped by its PID (its process group) when the session ends. Each test file
records what it compared, request by request; the table is printed at the end of the run.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.venv_marks import mark_suite, suite_venv

VENV_VARIABLE = "PCACHE_VLLM_VENV"
RESULTS: list[dict] = []
"""Rows of the comparisons run: one per request (see `record`)."""


def vllm_venv() -> Path | str:
    """The venv, or why there is none."""
    return suite_venv(VENV_VARIABLE, "bench/vllm/install.sh", "vLLM", ("bin/vllm_cli.py",))


def pytest_collection_modifyitems(config, items):
    mark_suite(items, Path(__file__).parent, "vllm", vllm_venv())


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory) -> Path:
    from bench.vllm.model_dir import build_model_dir

    return build_model_dir(tmp_path_factory.mktemp("vllm") / "model")


@pytest.fixture(scope="session")
def vllm_kv_events() -> str:
    """The ZMQ endpoint the session's vLLM publishes its KV events on."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"tcp://127.0.0.1:{probe.getsockname()[1]}"


@pytest.fixture(scope="session")
def vllm_url(model_dir, vllm_kv_events):
    """The base URL (no /v1) of vLLM serving `model_dir`, publishing its KV events."""
    from bench.vllm.server import VllmStartError, vllm_server

    venv = vllm_venv()
    assert not isinstance(venv, str), venv
    timeout = float(os.environ.get("PCACHE_VLLM_START_TIMEOUT", "600"))
    try:
        log = model_dir.parent / "vllm.log"
        with vllm_server(venv, model_dir, log, timeout, kv_events=vllm_kv_events) as s:
            print(f"\nvLLM pid {s.pid} on {s.url}, healthy after {s.start_s:.0f} s", flush=True)
            yield s.url
    except VllmStartError as error:
        pytest.fail(str(error))


@pytest.fixture
def record():
    """Adds one row per request to the table printed at the end of the run."""
    return RESULTS.append


def pytest_terminal_summary(terminalreporter):
    if not RESULTS:
        return
    terminalreporter.section("pcache vs vLLM, request by request")
    columns = list(dict.fromkeys(key for row in RESULTS for key in row))
    widths = {c: max(len(c), *(len(str(row.get(c, ""))) for row in RESULTS)) for c in columns}
    terminalreporter.write_line("  ".join(c.ljust(widths[c]) for c in columns))
    for row in RESULTS:
        cells = (str(row.get(c, "")).ljust(widths[c]) for c in columns)
        terminalreporter.write_line("  ".join(cells))
