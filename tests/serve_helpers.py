"""A real `pcache serve` for tests: in this process (uvicorn in a thread, so a test can look
inside its engine) or as a child process; loopback only, a free port, always stopped."""

from __future__ import annotations

import contextlib
import os
import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@contextlib.contextmanager
def served(**options):
    """(base URL, `pcache.serve.app.Server`) of a server running until the block ends."""
    import uvicorn

    from pcache.serve.app import ServeOptions, build_server, create_app

    server = build_server(ServeOptions(**{"model": "tiny", **options}))
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    config = uvicorn.Config(create_app(server), log_level="warning", access_log=False)
    runner = uvicorn.Server(config)
    thread = threading.Thread(target=runner.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not runner.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}", server
    finally:
        runner.should_exit = True
        thread.join(timeout=30)
        listener.close()
        assert not thread.is_alive(), "the server did not stop"


@contextlib.contextmanager
def serve_process(*arguments: str, env: dict[str, str] | None = None):
    """The base URL of `python -m pcache serve --port 0 ...` in a child (`env`: more of its
    environment), stopped by its PID."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), **(env or {}))
    child = subprocess.Popen(
        [sys.executable, "-m", "pcache", "serve", "--port", "0", *arguments],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        env=env,
        cwd=ROOT,
        text=True,
    )
    try:
        assert child.stderr is not None
        line = child.stderr.readline()  # the banner comes after the model is loaded
        match = re.search(r"on (http://127\.0\.0\.1:\d+)/v1", line)
        assert match, f"no banner from pcache serve: {line!r}"
        url = match.group(1)
        wait_until_healthy(url, child)
        yield url
    finally:
        child.terminate()
        try:
            child.wait(timeout=20)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait(timeout=10)


def wait_until_healthy(url: str, child: subprocess.Popen, timeout: float = 30) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert child.poll() is None, "pcache serve exited"
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return
        time.sleep(0.05)
    raise AssertionError("pcache serve never became healthy")


def metric(text: str, name: str, **labels: str) -> float:
    """The value of one sample of a Prometheus text page (0 when absent)."""
    from prometheus_client.parser import text_string_to_metric_families

    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return sample.value
    return 0.0


def write_random_checkpoint(preset: str, directory: Path, **overrides) -> None:
    """config.json + model.safetensors of a preset's shape (seeded random weights), written
    from the engine's own model with Hugging Face's weight names (no transformers import)."""
    import json

    import torch
    from safetensors.torch import save_file

    from pcache.engine.loader import build_model, checkpoint_tensors, random_init
    from pcache.engine.model_config import model_config_from_dict
    from pcache.models import preset_config

    data = {**preset_config(preset), **overrides}
    (directory / "config.json").write_text(json.dumps(data))
    config = model_config_from_dict(data, "test")
    model = build_model(config, torch.float32, torch.device("cpu"), 256)
    random_init(model, seed=0)
    save_file(checkpoint_tensors(model), str(directory / "model.safetensors"))


def raw_exchange(url: str, data: bytes | list[bytes], timeout: float = 10) -> tuple[int, bytes]:
    """Send bytes (or chunks, stopping once the server answers or closes) on one loopback
    connection; the status and body of the answer. A server that never answers fails."""
    import select
    import urllib.parse

    address = urllib.parse.urlsplit(url)
    chunks = [data] if isinstance(data, bytes) else data
    received = b""
    deadline = time.monotonic() + timeout
    with socket.create_connection((address.hostname, address.port), timeout=timeout) as sock:
        for chunk in chunks:
            readable, _, _ = select.select([sock], [], [], 0)
            if readable:
                break  # it answered already: stop sending
            try:
                sock.sendall(chunk)
            except OSError:  # it closed the connection while we sent
                break
        while time.monotonic() < deadline:
            try:
                piece = sock.recv(65536)
            except OSError:
                break
            if not piece:
                break
            received += piece
            head, _, body = received.partition(b"\r\n\r\n")
            match = re.search(rb"content-length: (\d+)", head, re.IGNORECASE)
            if match and len(body) >= int(match.group(1)):
                break
    assert received, "the server sent nothing"
    head, _, body = received.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


def peak_rss_kib(pid: int | str = "self") -> int:
    """The peak resident memory of a process (VmHWM), in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")
