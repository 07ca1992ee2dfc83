"""Start-up of `pcache --help` and a small `pcache diff`, this tree against another commit,
with `python -c pass` as the floor: alternating rounds, medians, spread and load average, and
the outputs compared byte for byte. Wall seconds, and the CPU seconds (user + system) of each
run, which another process's load inflates less.

    python bench/startup.py --against REV [--rounds 21]

The other tree is `git archive REV` unpacked in a scratch folder (`house_outputs.checkout`).
Both run as `python -P -m pcache` from this repository's root, their compiled modules cached
in one scratch folder (`PYTHONPYCACHEPREFIX`, as an installed package has them; a warm-up run
fills it and pcache's user cache), so the figures time starting, not compiling.
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

FLOOR = "python -c pass"
COMMANDS = {
    FLOOR: ["-c", "pass"],
    "pcache --help": ["-m", "pcache", "--help"],
    "pcache diff a b": ["-m", "pcache", "diff", "samples/a.json", "samples/b.json"],
}
COMPARED = [
    ["--help"],
    ["diff", "--help"],
    ["diff", "samples/a.json", "samples/b.json"],
    ["diff", "samples/a.json", "samples/b.json", "--format", "json"],
    ["diff", "samples/a.json", "samples/b.json", "--tokenizer", "o200k_base"],
    ["diff", "samples/a.json", "samples/b.json", "--block-size", "x"],
]
"""Outputs (stdout, stderr, exit code) that must be the same in both trees."""


def environment(tree: Path, scratch: Path) -> dict[str, str]:
    values = {**os.environ, **house_outputs.ENVIRONMENT, "PYTHONPATH": str(tree)}
    values["PYTHONPYCACHEPREFIX"] = str(scratch / "pycache")
    values.pop("PYTHONDONTWRITEBYTECODE", None)
    return values


def run(arguments: list[str], values: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-P", *arguments], cwd=ROOT, env=values, capture_output=True
    )


def output(arguments: list[str], values: dict[str, str]) -> bytes:
    done = run(["-m", "pcache", *arguments], values)
    return b"%s\n--- stderr\n%s\n--- rc %d\n" % (done.stdout, done.stderr, done.returncode)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--against", required=True, help="a commit of this repository")
    parser.add_argument("--rounds", type=int, default=21)
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        scratch = Path(folder)
        before = house_outputs.checkout(arguments.against, scratch)
        trees = {"before": environment(before, scratch), "after": environment(ROOT, scratch)}
        differing = 0
        for compared in COMPARED:
            was, now = (output(compared, values) for values in trees.values())
            differing += was != now
            print(f"{'same' if was == now else 'DIFFERS'}  pcache {' '.join(compared)}")
        seconds = {name: {tree: [] for tree in trees} for name in COMMANDS}
        cpu = {name: {tree: [] for tree in trees} for name in COMMANDS}
        loads = [os.getloadavg()[0]]
        for _ in range(arguments.rounds):
            for name, command in COMMANDS.items():
                for tree, values in trees.items():
                    used = _children_cpu()
                    start = time.perf_counter()
                    run(command, values)
                    seconds[name][tree].append(time.perf_counter() - start)
                    cpu[name][tree].append(_children_cpu() - used)
            loads.append(os.getloadavg()[0])
    print(
        f"\n{arguments.rounds} alternating rounds on {os.cpu_count()} CPUs, load average"
        f" {min(loads):.2f}-{max(loads):.2f} (1 min), python {sys.version.split()[0]}"
    )
    floor = {tree: statistics.median(seconds[FLOOR][tree]) for tree in trees}
    print(
        f"| command | before ({arguments.against}) median (min-max) | after median (min-max)"
        " | after/before | before/floor | after/floor |"
    )
    print("|---|---|---|---|---|---|")
    for name, by_tree in seconds.items():
        cells = [
            f"{statistics.median(values):.3f} s ({min(values):.3f}-{max(values):.3f})"
            for values in by_tree.values()
        ]
        before, after = (statistics.median(values) for values in by_tree.values())
        print(
            f"| {name} | {cells[0]} | {cells[1]} | {after / before:.2f}x"
            f" | {before / floor['before']:.1f}x | {after / floor['after']:.1f}x |"
        )
    print("\nCPU seconds (user + system), median (min-max)")
    print("| command | before | after | after/before |\n|---|---|---|---|")
    for name, by_tree in cpu.items():
        cells = [
            f"{statistics.median(values):.3f} s ({min(values):.3f}-{max(values):.3f})"
            for values in by_tree.values()
        ]
        before, after = (statistics.median(values) for values in by_tree.values())
        print(f"| {name} | {cells[0]} | {cells[1]} | {after / before:.2f}x |")
    print(f"\n{len(COMPARED) - differing} of {len(COMPARED)} outputs identical")
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
