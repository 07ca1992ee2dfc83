"""Start vLLM's CPU build (from `install.sh`'s venv) on loopback and stop it by its PID.

    with vllm_server(venv, model_dir) as server:
        server.url  # http://127.0.0.1:PORT

The server listens on 127.0.0.1 on a free port with the settings pcache compares against:
prefix caching on, cached tokens reported per request, `--block-size 32` (the CPU attention
backend takes multiples of 32 only), float32, `/reset_prefix_cache` enabled. It is started in
its own process group (vLLM runs its engine in a child process) and that group is stopped when
the block ends: SIGTERM, then SIGKILL after `stop_timeout` seconds.

Usage: python bench/vllm/server.py VENV MODEL_DIR [NUM_GPU_BLOCKS]   (serves until interrupted)
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

BLOCK_SIZE = 32
MAX_MODEL_LEN = 4096
START_TIMEOUT_S = 300.0
"""vLLM is ready after 80-100 s on a quiet 2-core machine (about 40 s compiling)."""
STOP_TIMEOUT_S = 30.0


class VllmStartError(RuntimeError):
    """vLLM exited or did not become healthy in time; the message ends with its log's tail."""


@dataclass(frozen=True)
class VllmServer:
    url: str
    """The base URL, without /v1."""
    pid: int
    log: Path
    start_s: float
    """Seconds from the start until /health answered."""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def command(
    venv: Path,
    model_dir: Path,
    port: int,
    kv_events: str | None = None,
    num_gpu_blocks: int | None = None,
) -> list[str]:
    """`kv_events`: a ZMQ endpoint (tcp://127.0.0.1:PORT) to publish vLLM's KV events on;
    `num_gpu_blocks`: the KV pool's size in blocks (vLLM's `--num-gpu-blocks-override`, the
    null block included), instead of what `VLLM_CPU_KVCACHE_SPACE` holds."""
    events = []
    if kv_events is not None:
        config = {"enable_kv_cache_events": True, "publisher": "zmq", "endpoint": kv_events}
        events = ["--kv-events-config", json.dumps(config)]
    max_model_len = MAX_MODEL_LEN
    if num_gpu_blocks is not None:  # vLLM refuses a model length its pool cannot hold
        events += ["--num-gpu-blocks-override", str(num_gpu_blocks)]
        max_model_len = min(max_model_len, (num_gpu_blocks - 1) * BLOCK_SIZE)
    return [
        str(venv / "bin" / "python"),
        str(venv / "bin" / "vllm_cli.py"),
        "serve",
        str(model_dir),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--enable-prefix-caching",
        "--enable-prompt-tokens-details",
        "--block-size",
        str(BLOCK_SIZE),
        "--max-model-len",
        str(max_model_len),
        "--dtype",
        "float32",
        *events,
    ]


def environment(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The server's environment: this one, offline, loopback only, then `extra`."""
    env = dict(
        os.environ,
        VLLM_HOST_IP="127.0.0.1",
        VLLM_CPU_KVCACHE_SPACE="2",
        VLLM_SERVER_DEV_MODE="1",
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        VLLM_NO_USAGE_STATS="1",
        DO_NOT_TRACK="1",
    )
    env.update(extra or {})
    return env


def log_tail(log: Path, lines: int = 15) -> str:
    try:
        text = log.read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    kept = [line for line in text if not line.startswith("WARNING: Location")]
    return "\n".join(kept[-lines:])


def healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


def stop(child: subprocess.Popen, timeout: float = STOP_TIMEOUT_S) -> None:
    """SIGTERM to the server's process group, SIGKILL when it has not ended in time."""
    for sent in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, sent)
        try:
            child.wait(timeout=timeout)
            break
        except subprocess.TimeoutExpired:
            continue
    with contextlib.suppress(ProcessLookupError):  # the engine child may outlive the parent
        os.killpg(child.pid, signal.SIGKILL)


@contextlib.contextmanager
def vllm_server(
    venv: Path,
    model_dir: Path,
    log: Path | None = None,
    timeout: float = START_TIMEOUT_S,
    kv_events: str | None = None,
    extra_env: dict[str, str] | None = None,
    num_gpu_blocks: int | None = None,
) -> Iterator[VllmServer]:
    """A running vLLM until the block ends; VllmStartError when it does not start in time.
    `extra_env`: more environment variables for it (VLLM_CPU_OMP_THREADS_BIND...);
    `num_gpu_blocks`: its pool's size in blocks (see `command`)."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = log or Path(model_dir).parent / f"vllm-{port}.log"
    started = time.monotonic()
    with open(log, "wb") as stream:
        child = subprocess.Popen(
            command(Path(venv), Path(model_dir), port, kv_events, num_gpu_blocks),
            stdin=subprocess.DEVNULL,
            stdout=stream,
            stderr=subprocess.STDOUT,
            env=environment(extra_env),
            start_new_session=True,
        )
    try:
        while not healthy(url):
            if child.poll() is not None:
                raise VllmStartError(
                    f"vLLM exited with code {child.returncode}; {log}:\n{log_tail(log)}"
                )
            if time.monotonic() - started > timeout:
                raise VllmStartError(
                    f"vLLM not healthy after {timeout:.0f} s; {log}:\n{log_tail(log)}"
                )
            time.sleep(1)
        yield VllmServer(url, child.pid, log, time.monotonic() - started)
    finally:
        stop(child)


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 3):
        print("usage: python bench/vllm/server.py VENV MODEL_DIR [NUM_GPU_BLOCKS]", file=sys.stderr)
        return 2
    blocks = int(argv[2]) if len(argv) == 3 else None
    with vllm_server(Path(argv[0]), Path(argv[1]), num_gpu_blocks=blocks) as server:
        print(
            f"vLLM on {server.url}/v1 (pid {server.pid}, ready after {server.start_s:.0f} s,"
            f" log {server.log}); Ctrl-C stops it",
            flush=True,
        )
        with contextlib.suppress(KeyboardInterrupt):
            while True:
                time.sleep(3600)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
