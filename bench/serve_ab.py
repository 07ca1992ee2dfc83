"""`pcache serve` from two checkouts, alternately, with `vllm bench serve` as the one client.

Each round starts checkout A's server, benchmarks it on every dataset, stops it by its PID, then
does the same for checkout B (the order flips every round, so neither always runs first on a
machine whose load drifts). Same model directory, model threads, block size and datasets as
`bench/vllm_side_by_side.sh`. Prints every run's TTFT p50, TPOT p50, ITL p50 and output
throughput with the load average, then per checkout and dataset the medians over the rounds
with their spread (min-max), and B's medians over A's.

Usage:
    python bench/serve_ab.py A_ROOT B_ROOT [--rounds 3] [--datasets random prefix_repetition]
      [--venv /work/vllm-venv] [--threads 1] [--prompts 32] [--concurrency 4]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from serve_child import stop_server  # noqa: E402

INPUT_LEN, OUTPUT_LEN = 256, 64
DATASETS = {
    "random": [
        "--dataset-name", "random", "--random-input-len", str(INPUT_LEN),
        "--random-output-len", str(OUTPUT_LEN),
    ],
    "prefix_repetition": [
        "--dataset-name", "prefix_repetition",
        "--prefix-repetition-prefix-len", str(INPUT_LEN * 3 // 4),
        "--prefix-repetition-suffix-len", str(INPUT_LEN // 4),
        "--prefix-repetition-num-prefixes", "4",
        "--prefix-repetition-output-len", str(OUTPUT_LEN),
    ],
}  # fmt: skip
METRICS = ("median_ttft_ms", "median_tpot_ms", "median_itl_ms", "output_throughput")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_healthy(url: str, child: subprocess.Popen, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as answer:
                if answer.status == 200:
                    return
        except OSError:
            pass
        if child.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"the server at {url} never became healthy")
        time.sleep(0.5)


def run_checkout(root: Path, args, model: str, out: Path, tag: str) -> dict[str, dict]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = dict(os.environ, PYTHONPATH=str(root), HF_HUB_OFFLINE="1")
    env["OMP_NUM_THREADS"] = str(args.threads)
    command = [sys.executable, "-m", "pcache", "serve", "--model", model, "--port", str(port)]
    command += ["--block-size", "32", "--kv-cache-tokens", "65536"]
    log = open(out / f"{tag}.log", "w")  # noqa: SIM115 (closed below)
    child = subprocess.Popen(command, cwd=root, env=env, stdout=log, stderr=log)
    results = {}
    try:
        wait_healthy(url, child, 300)
        for dataset in args.datasets:
            urllib.request.urlopen(
                urllib.request.Request(f"{url}/reset_prefix_cache", method="POST"), timeout=30
            ).close()
            load_before = os.getloadavg()[0]
            name = f"{tag}-{dataset}.json"
            client = [
                f"{args.venv}/bin/python", f"{args.venv}/bin/vllm_cli.py", "bench", "serve",
                "--backend", "openai", "--base-url", url, "--endpoint", "/v1/completions",
                "--model", model, "--tokenizer", model, *DATASETS[dataset],
                "--num-prompts", str(args.prompts), "--max-concurrency", str(args.concurrency),
                "--ignore-eos", "--seed", "0", "--percentile-metrics", "ttft,tpot,itl,e2el",
                "--metric-percentiles", "50,90", "--save-result", "--result-dir", str(out),
                "--result-filename", name,
            ]  # fmt: skip
            with open(out / f"{tag}-{dataset}.txt", "w") as text:
                subprocess.run(client, stdout=text, stderr=subprocess.STDOUT, check=True)
            result = json.loads((out / name).read_text())
            result["load"] = (load_before, os.getloadavg()[0])
            results[dataset] = result
            print(
                f"{tag:12} {dataset:18} TTFT p50 {result['median_ttft_ms']:7.1f}"
                f"  TPOT p50 {result['median_tpot_ms']:6.2f}"
                f"  ITL p50 {result['median_itl_ms']:6.2f}"
                f"  out {result['output_throughput']:6.1f} tok/s  completed {result['completed']}"
                f"  load {result['load'][0]:.2f} -> {result['load'][1]:.2f}",
                flush=True,
            )
    finally:
        stop_server(child)
        log.close()
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("a", type=Path)
    parser.add_argument("b", type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=list(DATASETS))
    parser.add_argument("--venv", default=os.environ.get("PCACHE_VLLM_VENV", "/work/vllm-venv"))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--prompts", type=int, default=32)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--model", default=None, help="default: bench-llama with a tokenizer")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="pcache-serve-ab-"))
    out.mkdir(parents=True, exist_ok=True)
    model = args.model or str(Path(tempfile.gettempdir()) / "pcache-bench-llama-tokenizer")
    if args.model is None:
        fixture = Path.home() / ".cache/pcache-fixtures/llama3.2-1"
        subprocess.run(
            [sys.executable, str(HERE / "bench_decode.py"), "--write-model", model,
             "--tokenizer-from", str(fixture)],
            check=True, env=dict(os.environ, PYTHONPATH=str(HERE.parent)),
        )  # fmt: skip
    checkouts = {"A": args.a.resolve(), "B": args.b.resolve()}
    print(f"A = {checkouts['A']}\nB = {checkouts['B']}\nresults in {out}")
    runs: dict[str, list[dict]] = {"A": [], "B": []}
    for round_ in range(args.rounds):
        order = ("A", "B") if round_ % 2 == 0 else ("B", "A")
        for label in order:
            tag = f"{label}{round_ + 1}"
            runs[label].append(run_checkout(checkouts[label], args, model, out, tag))
    print(f"medians over {args.rounds} rounds [min-max]:")
    for dataset in args.datasets:
        medians = {}
        for label in ("A", "B"):
            cells = []
            for metric in METRICS:
                values = [run[dataset][metric] for run in runs[label]]
                medians[label, metric] = statistics.median(values)
                cells.append(
                    f"{metric.replace('median_', '')} {statistics.median(values):.2f}"
                    f" [{min(values):.2f}-{max(values):.2f}]"
                )
            print(f"  {label} {dataset:18} " + "  ".join(cells))
        ratios = "  ".join(
            f"{re.sub('median_', '', metric)} x{medians['B', metric] / medians['A', metric]:.2f}"
            for metric in METRICS
        )
        print(f"  B/A {dataset:16} {ratios}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
