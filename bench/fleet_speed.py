"""Fleet simulations, this tree against another: wall and CPU time of whole `pcache replay`
runs (start-up included), trees alternating, medians, spread, load average, and the JSON
outputs compared byte for byte.

    python bench/fleet_speed.py --against REV [--rounds 5] [--trace FILE] [--keep DIR]
    python bench/fleet_speed.py --tree DIR                # DIR: a checkout holding pcache/

Commands (`--format json`, over `--trace`, default the Mooncake conversation trace, 12,031
requests):
- `8 replicas`: `--replicas 8 --router sglang --concurrency timed`;
- `4x4 grid`: `--replicas 1,2,4,8 --router round-robin,least-load,sglang,precise
  --concurrency timed`.

Each command runs as `python -P -m pcache ...` from this repository's root with
`PYTHONPATH` set to the tree (the other tree: `git archive REV` unpacked in a scratch folder,
by `bench/house_outputs.py`'s `checkout`). Every tree's modules are byte-compiled by one
untimed run first (a cache folder of its own, as an installed package has them), then each
round runs the trees one after the other, the first of them alternating from round to round.
CPU time (user + system of the command) moves less than wall time on a machine that others
load. Exits 1 when an output differs between the trees or between rounds.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("house_outputs", ROOT / "bench" / "house_outputs.py")
assert _spec is not None and _spec.loader is not None
house_outputs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(house_outputs)

SHARED = next(
    (
        folder / "shared" / "traces" / "mooncake" / "conversation_trace.jsonl"
        for folder in (ROOT.parent, ROOT.parent.parent)
        if (folder / "shared" / "traces" / "mooncake" / "conversation_trace.jsonl").is_file()
    ),
    ROOT / "tests" / "data" / "mooncake" / "conversation_head.jsonl",
)
COMMANDS = {
    "8 replicas": "--replicas 8 --router sglang --concurrency timed",
    "4x4 grid": "--replicas 1,2,4,8 --router round-robin,least-load,sglang,precise"
    " --concurrency timed",
}


def cpu_seconds() -> float:
    """User + system seconds of this process's finished children."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(tree: Path, cache: Path, trace: Path, arguments: str) -> tuple[float, float, bytes]:
    """Wall seconds, CPU seconds and stdout of one `pcache replay TRACE --simulate ARGUMENTS
    -f json`."""
    environment = {
        **os.environ,
        "PYTHONPATH": str(tree),
        "PYTHONPYCACHEPREFIX": str(cache),
        "HF_HUB_OFFLINE": "1",
    }
    environment.pop("PYTHONDONTWRITEBYTECODE", None)
    command = ["replay", str(trace), "--simulate", *arguments.split(), "--format", "json"]
    cpu, start = cpu_seconds(), time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-P", "-m", "pcache", *command],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        timeout=600,
    )
    seconds, cpu = time.perf_counter() - start, cpu_seconds() - cpu
    if done.returncode:
        raise SystemExit(f"{tree}: pcache {' '.join(command)} failed:\n{done.stderr.decode()}")
    return seconds, cpu, done.stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    other = parser.add_mutually_exclusive_group(required=True)
    other.add_argument("--against", help="a commit of this repository")
    other.add_argument("--tree", type=Path, help="a checkout holding pcache/")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--trace", type=Path, default=SHARED)
    parser.add_argument("--keep", type=Path, help="write each tree's outputs here")
    arguments = parser.parse_args()
    label = arguments.against or str(arguments.tree)
    differing = 0
    with tempfile.TemporaryDirectory() as scratch:
        before = arguments.tree or house_outputs.checkout(arguments.against, Path(scratch))
        trees = {"before": before.resolve(), "after": ROOT}
        caches = {name: Path(scratch) / f"pycache-{name}" for name in trees}
        outputs = {
            (command, name): run(tree, caches[name], arguments.trace, flags)[2]
            for command, flags in COMMANDS.items()
            for name, tree in trees.items()
        }
        seconds: dict[tuple[str, str], list[float]] = {key: [] for key in outputs}
        cpu: dict[tuple[str, str], list[float]] = {key: [] for key in outputs}
        loads = [os.getloadavg()[0]]
        for number in range(arguments.rounds):
            order = list(trees) if number % 2 == 0 else list(reversed(trees))
            for command, flags in COMMANDS.items():
                for name in order:
                    took, used, output = run(trees[name], caches[name], arguments.trace, flags)
                    seconds[command, name].append(took)
                    cpu[command, name].append(used)
                    if output != outputs[command, name]:
                        print(f"{name}: {command} printed something else in round {number + 1}")
                        differing += 1
            loads.append(os.getloadavg()[0])
    print(f"trace {arguments.trace}, {arguments.rounds} rounds, trees alternating")
    print(f"load average (1 min) over the rounds: {min(loads):.2f}-{max(loads):.2f}")
    print(
        f"| command | time | before ({label}) median (min-max) | after median (min-max)"
        " | after/before | JSON |"
    )
    print("|---|---|---|---|---|---|")
    for command in COMMANDS:
        same = outputs[command, "before"] == outputs[command, "after"]
        differing += not same
        for kind, measured in (("wall", seconds), ("CPU", cpu)):
            cells = []
            for name in trees:
                values = measured[command, name]
                median = statistics.median(values)
                cells.append(f"{median:.2f} s ({min(values):.2f}-{max(values):.2f})")
            ratio = statistics.median(measured[command, "after"]) / statistics.median(
                measured[command, "before"]
            )
            verdict = "identical" if same else "DIFFERS"
            print(f"| {command} | {kind} | {cells[0]} | {cells[1]} | {ratio:.2f}x | {verdict} |")
        if arguments.keep is not None:
            arguments.keep.mkdir(parents=True, exist_ok=True)
            for name in trees:
                slug = command.replace(" ", "-")
                (arguments.keep / f"{slug}.{name}.json").write_bytes(outputs[command, name])
    for command, flags in COMMANDS.items():
        print(f"{command}: pcache replay TRACE --simulate {flags} --format json")
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
