"""Two servers, alternately, with `vllm bench serve` as the one client: `pcache serve` from
two checkouts, or one checkout against vLLM's CPU build (the side `vllm`).

Both servers are started once, each waited for, and kept up; each round then benchmarks A on
every dataset, then B (the order flips every round, so neither always runs first on a machine
whose load drifts); the prefix cache is reset before every run; both are stopped by their
PIDs at the end. Same model directory, model threads, block size and datasets as
`bench/vllm_side_by_side.sh`; vLLM's model threads are bound to the first CPUs
(VLLM_CPU_OMP_THREADS_BIND), pcache's too with `--engine-cpus`. Prints every run's TTFT p50,
TPOT p50, ITL p50, output throughput and prefix-cache hits/queries with the load average,
then per side and dataset the medians over the rounds with their spread (min-max), and B's
medians over A's.

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
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]
from serve_child import stop_server  # noqa: E402

from bench.vllm.server import VllmStartError, free_port, healthy, vllm_server  # noqa: E402
from pcache.replayer.endpoint.server_metrics import MetricsSnapshot, metrics_delta, parse_metrics  # noqa: E402

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
    """One running server: its label (A or B), URL and kind (`pcache` or `vllm`)."""

    label: str
    url: str
    kind: str


def bound_cpus(threads: int) -> str:
    """The CPUs vLLM's model threads are bound to (VLLM_CPU_OMP_THREADS_BIND), and pcache's
    with `--engine-cpus` (a checkout without that option runs its engine unbound)."""
    return "0" if threads == 1 else f"0-{threads - 1}"


def start_side(label: str, spec: str, args, model: str, out: Path, stack: ExitStack) -> Side:
    """`vllm`: vLLM's CPU build from `--venv` (`bench/vllm/server.py`'s settings, its process
    group stopped when `stack` closes); else `pcache serve` from the checkout at `spec`,
    stopped by its PID when `stack` closes. Returns once the server answers /health."""
    log = out / f"{label}.log"
    if spec == "vllm":
        threads = bound_cpus(args.threads)
        try:
            server = stack.enter_context(
                vllm_server(
                    Path(args.venv), Path(model), log, timeout=600,
                    extra_env={"VLLM_CPU_OMP_THREADS_BIND": threads},
                )
            )  # fmt: skip
        except VllmStartError as error:
            raise SystemExit(str(error)) from None
        return Side(label, server.url, "vllm")
    root = Path(spec).resolve()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH=str(root))
    env["OMP_NUM_THREADS"] = str(args.threads)
    command = [sys.executable, "-m", "pcache", "serve", "--model", model, "--port", str(port)]
    command += ["--block-size", "32", "--kv-cache-tokens", "65536"]
    if args.engine_cpus and "--engine-cpus" in (root / "pcache/cli/serve.py").read_text():
        command += ["--engine-cpus", bound_cpus(args.threads)]  # where vLLM binds its threads
    stream = stack.enter_context(open(log, "w"))  # noqa: SIM115 (the stack closes it)
    child = subprocess.Popen(command, cwd=root, env=env, stdout=stream, stderr=stream)
    stack.callback(stop_server, child)
    deadline = time.monotonic() + 600
    while not healthy(url):
        if child.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"pcache serve at {url} never became healthy (log: {log})")
        time.sleep(0.5)
    return Side(label, url, "pcache")


def prefix_counters(url: str) -> MetricsSnapshot:
    with urllib.request.urlopen(f"{url}/metrics", timeout=30) as answer:
        return parse_metrics(answer.read().decode())


def bench_side(side: Side, args, model: str, out: Path, round_: int) -> dict[str, dict]:
    results = {}
    for dataset in args.datasets:
        urllib.request.urlopen(
            urllib.request.Request(f"{side.url}/reset_prefix_cache", method="POST"), timeout=30
        ).close()
        before = prefix_counters(side.url)
        load_before = os.getloadavg()[0]
        name = f"{side.label}{round_}-{dataset}.json"
        client = [
            f"{args.venv}/bin/python", f"{args.venv}/bin/vllm_cli.py", "bench", "serve",
            "--backend", "openai", "--base-url", side.url, "--endpoint", "/v1/completions",
            "--model", model, "--tokenizer", model, *DATASETS[dataset],
            "--num-prompts", str(args.prompts), "--max-concurrency", str(args.concurrency),
            "--ignore-eos", "--seed", "0", "--percentile-metrics", "ttft,tpot,itl,e2el",
            "--metric-percentiles", "50,90", "--save-result", "--save-detailed",
            "--result-dir", str(out),
            "--result-filename", name,
        ]  # fmt: skip
        with open(out / f"{side.label}{round_}-{dataset}.txt", "w") as text:
            subprocess.run(client, stdout=text, stderr=subprocess.STDOUT, check=True)
        result = json.loads((out / name).read_text())
        result["load"] = (load_before, os.getloadavg()[0])
        delta = metrics_delta(before, prefix_counters(side.url))
        result["prefix"] = (
            int(delta.get("prefix_cache_hits", 0)),
            int(delta.get("prefix_cache_queries", 0)),
        )
        results[dataset] = result
        print(
            f"{side.label}{round_} {side.kind:7} {dataset:18}"
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


def add_server_arguments(parser: argparse.ArgumentParser) -> None:
    """The two sides and what both are started with (`start_side`)."""
    parser.add_argument("a", help="a checkout's root, or vllm")
    parser.add_argument("b", help="a checkout's root, or vllm")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--venv", default=os.environ.get("PCACHE_VLLM_VENV", "/work/vllm-venv"))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--engine-cpus", action="store_true", help="bind pcache's engine as vLLM's is bound"
    )
    parser.add_argument("--model", default=None, help="default: bench-llama with a tokenizer")
    parser.add_argument("--out", type=Path, default=None)


def bench_model(args) -> str:
    """`--model`, else bench-llama's random weights with the Llama 3.2 fixture's tokenizer
    (built if need be; written by `bench_decode.py --write-model`)."""
    if args.model is not None:
        return args.model
    from tests.fixtures.build_tokenizers import build

    model = str(Path(tempfile.gettempdir()) / "pcache-bench-llama-tokenizer")
    fixture = build(["llama3.2"])["llama3.2"]  # built once into the fixtures cache
    subprocess.run(
        [sys.executable, str(HERE / "bench_decode.py"), "--write-model", model,
         "--tokenizer-from", str(fixture)],
        check=True, env=dict(os.environ, PYTHONPATH=str(HERE.parent)),
    )  # fmt: skip
    return model


def set_up(args, prefix: str) -> tuple[Path, str, dict[str, str]]:
    """The results folder (`--out`, else a new one named `prefix...`), the model and the two
    sides' specs, printed."""
    out = args.out or Path(tempfile.mkdtemp(prefix=prefix))
    out.mkdir(parents=True, exist_ok=True)
    model = bench_model(args)
    specs = {"A": args.a, "B": args.b}
    print(f"A = {specs['A']}\nB = {specs['B']}\nresults in {out}")
    return out, model, specs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_server_arguments(parser)
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=list(DATASETS))
    parser.add_argument("--prompts", type=int, default=32)
    parser.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args()
    out, model, specs = set_up(args, "pcache-serve-ab-")
    runs: dict[str, list[dict]] = {"A": [], "B": []}
    with ExitStack() as stack:  # both stopped at the end, also on an error
        # one at a time: both load the model at start
        sides = {
            label: start_side(label, spec, args, model, out, stack) for label, spec in specs.items()
        }
        for round_ in range(args.rounds):
            order = ("A", "B") if round_ % 2 == 0 else ("B", "A")
            for label in order:
                runs[label].append(bench_side(sides[label], args, model, out, round_ + 1))
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
