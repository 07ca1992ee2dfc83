"""Two servers, alternately, with `vllm bench serve` as the one client: `pcache serve` from
two checkouts, or one checkout against vLLM's CPU build (the side `vllm`).

Both servers are started once, each waited for, and kept up; each round then benchmarks A on
every dataset, then B (the order flips every round, so neither always runs first on a machine
whose load drifts); the prefix cache is reset before every run; both are stopped by their
PIDs at the end. Same model directory, model threads, block size and datasets as
`bench/vllm_side_by_side.sh`. Prints every run's TTFT p50, TPOT p50, ITL p50, output
throughput and prefix-cache hits/queries with the load average, then per side and dataset the
medians over the rounds with their spread (min-max), and B's medians over A's.

Usage:
    python bench/serve_ab.py A_ROOT B_ROOT [--rounds 3] [--datasets random prefix_repetition]
      [--venv /work/vllm-venv] [--threads 1] [--prompts 32] [--concurrency 4]
    python bench/serve_ab.py vllm . --rounds 3      # vLLM against this checkout
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
from dataclasses import dataclass
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
    "random-prefix": [
        "--dataset-name", "random", "--random-prefix-len", str(INPUT_LEN // 2),
        "--random-input-len", str(INPUT_LEN // 2), "--random-output-len", str(OUTPUT_LEN),
    ],
}  # fmt: skip
METRICS = ("median_ttft_ms", "median_tpot_ms", "median_itl_ms", "output_throughput")


@dataclass
class Side:
    """One running server: its child process, URL and metric prefix (`pcache` or `vllm`)."""

    label: str
    spec: str
    child: subprocess.Popen
    url: str
    prefix: str


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


def start_side(label: str, spec: str, args, model: str, out: Path) -> Side:
    """`vllm`: vLLM's CPU build from `--venv` (block size 32, prefix caching, fp32); else
    `pcache serve` from the checkout at `spec`."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    if spec == "vllm":
        threads = "0" if args.threads == 1 else f"0-{args.threads - 1}"
        env.update(VLLM_HOST_IP="127.0.0.1", VLLM_CPU_KVCACHE_SPACE="2")
        env.update(VLLM_SERVER_DEV_MODE="1", VLLM_CPU_OMP_THREADS_BIND=threads)
        command = [f"{args.venv}/bin/python", f"{args.venv}/bin/vllm_cli.py", "serve", model]
        command += ["--host", "127.0.0.1", "--port", str(port), "--enable-prefix-caching"]
        command += ["--block-size", "32", "--max-model-len", "4096", "--dtype", "float32"]
        cwd, prefix = None, "vllm"
    else:
        root = Path(spec).resolve()
        env.update(PYTHONPATH=str(root), OMP_NUM_THREADS=str(args.threads))
        command = [sys.executable, "-m", "pcache", "serve", "--model", model, "--port", str(port)]
        command += ["--block-size", "32", "--kv-cache-tokens", "65536"]
        cwd, prefix = root, "pcache"
    log = open(out / f"{label}.log", "w")  # noqa: SIM115 (the child keeps it until stopped)
    child = subprocess.Popen(command, cwd=cwd, env=env, stdout=log, stderr=log)
    return Side(label, spec, child, url, prefix)


def counter(url: str, name: str) -> int:
    """The sum of one counter's samples on a Prometheus page."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=30) as answer:
        page = answer.read().decode()
    return int(sum(float(line.split()[-1]) for line in page.splitlines() if line.startswith(name)))


def bench_side(side: Side, args, model: str, out: Path, round_: int) -> dict[str, dict]:
    results = {}
    for dataset in args.datasets:
        urllib.request.urlopen(
            urllib.request.Request(f"{side.url}/reset_prefix_cache", method="POST"), timeout=30
        ).close()
        hits = f"{side.prefix}:prefix_cache_hits"
        queries = f"{side.prefix}:prefix_cache_queries"
        before = counter(side.url, hits), counter(side.url, queries)
        load_before = os.getloadavg()[0]
        name = f"{side.label}{round_}-{dataset}.json"
        client = [
            f"{args.venv}/bin/python", f"{args.venv}/bin/vllm_cli.py", "bench", "serve",
            "--backend", "openai", "--base-url", side.url, "--endpoint", "/v1/completions",
            "--model", model, "--tokenizer", model, *DATASETS[dataset],
            "--num-prompts", str(args.prompts), "--max-concurrency", str(args.concurrency),
            "--ignore-eos", "--seed", "0", "--percentile-metrics", "ttft,tpot,itl,e2el",
            "--metric-percentiles", "50,90", "--save-result", "--result-dir", str(out),
            "--result-filename", name,
        ]  # fmt: skip
        with open(out / f"{side.label}{round_}-{dataset}.txt", "w") as text:
            subprocess.run(client, stdout=text, stderr=subprocess.STDOUT, check=True)
        result = json.loads((out / name).read_text())
        result["load"] = (load_before, os.getloadavg()[0])
        result["prefix"] = (
            counter(side.url, hits) - before[0],
            counter(side.url, queries) - before[1],
        )
        results[dataset] = result
        print(
            f"{side.label}{round_} {side.prefix:7} {dataset:18}"
            f" TTFT p50 {result['median_ttft_ms']:7.1f}"
            f"  TPOT p50 {result['median_tpot_ms']:6.2f}"
            f"  ITL p50 {result['median_itl_ms']:6.2f}"
            f"  out {result['output_throughput']:6.1f} tok/s"
            f"  prefix hits {result['prefix'][0]}/{result['prefix'][1]}"
            f"  completed {result['completed']}"
            f"  load {result['load'][0]:.2f} -> {result['load'][1]:.2f}",
            flush=True,
        )
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("a", help="a checkout's root, or vllm")
    parser.add_argument("b", help="a checkout's root, or vllm")
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
    specs = {"A": args.a, "B": args.b}
    print(f"A = {specs['A']}\nB = {specs['B']}\nresults in {out}")
    sides: dict[str, Side] = {}
    try:
        for label, spec in specs.items():  # one at a time: both load the model at start
            sides[label] = start_side(label, spec, args, model, out)
            wait_healthy(sides[label].url, sides[label].child, 600)
        runs: dict[str, list[dict]] = {"A": [], "B": []}
        for round_ in range(args.rounds):
            order = ("A", "B") if round_ % 2 == 0 else ("B", "A")
            for label in order:
                runs[label].append(bench_side(sides[label], args, model, out, round_ + 1))
    finally:
        for side in sides.values():
            stop_server(side.child)
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
