"""The Ray executor beside local threads: wall time and identical output on a generated log.

    python bench/bench_executor.py                      # 10,000 requests, Llama 3.1, 3 rounds
    python bench/bench_executor.py --requests 2000 --repeat 5 --shape single

The log is `bench/bench_lint.py`'s (`sessions`: conversations repeating their history, or
`single`: one shared system prompt and a unique user turn per request), rendered with the
Llama 3.1 fixture (or `--hf-model DIR`). Each round runs, each in a fresh process under
/usr/bin/time -v, in an order that rotates by one every round:

- `pcache lint LOG --format json`, `pcache replay LOG --simulate --format json` and
  `pcache replay LOG --replicas 4 --router round-robin --format json` with
- `--jobs 1` and `--jobs N` (N: this machine's cores), locally;
- `--executor ray` starting its own local cluster (`ray.init()`, counted in the wall time);
- then, in rounds of their own, `--executor ray --ray-address auto` joining a cluster started
  once before them (`ray start --head --num-cpus N`; its start is not counted), beside
  `--jobs 1` again (while a cluster runs, `ray.init()` joins it instead of starting one).

Every configuration's stdout must equal `--jobs 1`'s, byte for byte (the script stops if not).
Figures: median wall time over the rounds with min-max, CPU time (user + system of the command
itself: Ray workers' CPU is not counted, only their wall time is), peak RSS of the command's own
process. The load average before and after is printed; the figures are comparable within one run
only. Shards: `PCACHE_SHARD_BYTES` (default 4 MiB).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_lint import ENVIRONMENT, generate, generate_single, timed  # noqa: E402

COMMANDS = {
    "lint": ["lint", "--format", "json", "--exit-zero"],
    "replay": ["replay", "--simulate", "--format", "json"],
    "replay x4": ["replay", "--replicas", "4", "--router", "round-robin", "--format", "json"],
}


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def start_cluster(cpus: int) -> str | None:
    ray = shutil.which("ray")
    if ray is None:
        return None
    started = subprocess.run(
        [ray, "start", "--head", f"--num-cpus={cpus}", "--include-dashboard=false"],
        capture_output=True,
        text=True,
        env=ENVIRONMENT,
    )
    if started.returncode != 0:
        print(f"ray start failed: {started.stderr[-500:]}")
        return None
    return "auto"  # this machine's running cluster (an explicit address needs its token)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--shape", choices=("sessions", "single"), default="sessions")
    parser.add_argument("--hf-model", help="a Hugging Face model dir (default: Llama 3.1 fixture)")
    parser.add_argument("--commands", default=",".join(COMMANDS), help="lint,replay,replay x4")
    args = parser.parse_args()
    try:
        import ray  # noqa: F401
    except ImportError:
        raise SystemExit("needs Ray: pip install ray (or pcache[ray])") from None
    if args.hf_model:
        model = args.hf_model
    else:
        from tests.fixtures.build_tokenizers import build

        model = str(build(["llama3.1"])["llama3.1"])
    cores = len(os.sched_getaffinity(0))
    folder = Path(tempfile.mkdtemp(prefix="pcache-executor-"))
    log = folder / "log.jsonl"
    (generate if args.shape == "sessions" else generate_single)(log, args.requests)
    size = log.stat().st_size / 2**20
    print(f"log: {args.requests} {args.shape} requests, {size:.0f} MiB; tokenizer {model}")
    print(f"load average before: {os.getloadavg()}")
    local = {
        "local --jobs 1": ["--jobs", "1"],
        f"local --jobs {cores}": ["--jobs", str(cores)],
    }
    names = [name.strip() for name in args.commands.split(",")]
    results: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
    digests: dict[str, str] = {}

    def rounds(configurations: dict[str, list[str]]) -> None:
        order = list(configurations)
        for round_number in range(args.repeat):
            rotated = order[round_number % len(order) :] + order[: round_number % len(order)]
            for command_name in names:
                for configuration in rotated:
                    words = COMMANDS[command_name]
                    command = [sys.executable, "-m", "pcache", words[0], str(log), "-t", model]
                    command += [*words[1:], *configurations[configuration]]
                    wall, cpu, rss, stdout = timed(command)
                    digest = hashlib.sha256(stdout.encode()).hexdigest()
                    if digest != digests.setdefault(command_name, digest):
                        raise SystemExit(f"{command_name} {configuration}: output differs")
                    results.setdefault((command_name, configuration), []).append((wall, cpu, rss))
                    where = f"round {round_number + 1} {command_name:9} {configuration}"
                    print(f"{where}: {wall:.2f} s", flush=True)

    try:
        # no cluster running: `ray.init()` starts one for the command (and stops it after)
        rounds({**local, "ray, own local cluster": ["--executor", "ray"]})
        address = start_cluster(cores)
        if address is not None:  # `ray.init()` would join it too: measured in a phase of its own
            running = f"ray, running cluster ({cores} CPUs)"
            rounds(
                {
                    "local --jobs 1 (cluster idle)": ["--jobs", "1"],
                    running: ["--executor", "ray", "--ray-address", address],
                }
            )
    finally:
        subprocess.run(["ray", "stop", "--force"], capture_output=True, env=ENVIRONMENT)
        shutil.rmtree(folder, ignore_errors=True)
    print(f"load average after: {os.getloadavg()}")
    print(f"\n{args.repeat} rounds, medians (min-max); every output identical to --jobs 1's\n")
    print("| command | configuration | wall s | CPU s (driver) | peak RSS MiB (driver) |")
    print("|---|---|---|---|---|")
    for (command_name, configuration), runs in results.items():
        walls, cpus, rsses = zip(*runs, strict=True)
        print(
            f"| {command_name} | {configuration} | {spread(list(walls))} |"
            f" {spread(list(cpus))} | {statistics.median(rsses):.0f} |"
        )


if __name__ == "__main__":
    main()
