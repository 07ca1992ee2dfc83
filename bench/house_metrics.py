"""How the house reads, this tree beside another: function lengths, `replay_command`'s
parameters, files per folder, import circles (modules and folders), duplicated code, and the
start-up and lint timings (alternating runs, medians, spread, load average).

    python bench/house_metrics.py --against REV [--rounds 9]

The other tree is `git archive REV` unpacked in a scratch folder; `duplicates` (when it is on
PATH) is run on both trees the same way.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("import_graph", ROOT / "bench" / "import_graph.py")
assert _spec is not None and _spec.loader is not None
import_graph = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(import_graph)
_spec = importlib.util.spec_from_file_location("house_outputs", ROOT / "bench" / "house_outputs.py")
assert _spec is not None and _spec.loader is not None
house_outputs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(house_outputs)
LONG = 150
"""A function over this many lines is counted as long."""


def functions(tree: Path) -> list[tuple[int, str, int]]:
    """(lines, place, parameters) of every function of `tree/pcache`."""
    found = []
    for path in sorted((tree / "pcache").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                arguments = node.args
                count = len(arguments.posonlyargs + arguments.args + arguments.kwonlyargs)
                place = f"{path.relative_to(tree)}:{node.lineno} {node.name}"
                found.append((node.end_lineno - node.lineno + 1, place, count))
    return sorted(found, reverse=True)


def folder_of(module: str) -> str:
    """`pcache.X` for every module under `pcache/X/` (a root module is its own folder)."""
    return ".".join(module.split(".")[:2])


def folder_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Circles between folders: a folder importing one that imports it back."""
    folders: dict[str, set[str]] = {}
    for module, imported in graph.items():
        edges = folders.setdefault(folder_of(module), set())
        edges.update(folder_of(name) for name in imported if folder_of(name) != folder_of(module))
    return import_graph.cycles(folders)


def type_checking_imports(tree: Path) -> int:
    """Imports under `if TYPE_CHECKING:` (a circle the graph does not see)."""
    count = 0
    for path in (tree / "pcache").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                count += 1
    return count


def duplicate_pairs(tree: Path) -> str:
    """The first line of `duplicates` over `tree/pcache` (its count of pairs)."""
    if shutil.which("duplicates") is None:
        return "duplicates not on PATH"
    done = subprocess.run(
        ["duplicates", "--repo", str(tree / "pcache"), "--seconds", "120"],
        capture_output=True,
        text=True,
    )
    return done.stdout.splitlines()[0] if done.stdout else done.stderr.strip()


def static(tree: Path) -> dict[str, object]:
    listed = functions(tree)
    replay = next(row for row in listed if row[1].endswith(" replay_command"))
    files = Counter(str(path.parent.relative_to(tree)) for path in (tree / "pcache").rglob("*.py"))
    graph = import_graph.import_graph(tree)
    return {
        "longest function": f"{listed[0][0]} lines ({listed[0][1]})",
        f"functions over {LONG} lines": sum(1 for row in listed if row[0] > LONG),
        "replay_command": f"{replay[0]} lines, {replay[2]} parameters",
        "modules": sum(files.values()),
        "most files in a folder": "{1} ({0})".format(*files.most_common(1)[0]),
        "root modules": files["pcache"],
        "module circles": len(import_graph.cycles(graph)),
        "folder circles": len(folder_cycles(graph)),
        "TYPE_CHECKING imports": type_checking_imports(tree),
        "duplicates": duplicate_pairs(tree),
    }


def timings(trees: dict[str, Path], rounds: int) -> dict[str, dict[str, list[float]]]:
    """Wall seconds of `pcache --help` and `pcache lint samples/prompts`, trees alternating."""
    commands = {"--help": ["--help"], "lint": ["lint", "samples/prompts", "-f", "json"]}
    seconds: dict[str, dict[str, list[float]]] = {
        name: {tree: [] for tree in trees} for name in commands
    }
    for _ in range(rounds):
        for name, arguments in commands.items():
            for label, tree in trees.items():
                environment = {**os.environ, "PYTHONPATH": str(tree), "HF_HUB_OFFLINE": "1"}
                start = time.perf_counter()
                subprocess.run(
                    [sys.executable, "-P", "-m", "pcache", *arguments],
                    cwd=ROOT,
                    env=environment,
                    capture_output=True,
                )
                seconds[name][label].append(time.perf_counter() - start)
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--against", required=True, help="a commit of this repository")
    parser.add_argument("--rounds", type=int, default=9)
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        before = house_outputs.checkout(
            arguments.against, Path(scratch), ("pcache", "bench/import_graph.py")
        )
        trees = {"before": before, "after": ROOT}
        rows = {label: static(tree) for label, tree in trees.items()}
        print(f"| measure | before ({arguments.against}) | after |\n|---|---|---|")
        for key in rows["before"]:
            print(f"| {key} | {rows['before'][key]} | {rows['after'][key]} |")
        load = os.getloadavg()
        measured = timings(trees, arguments.rounds)
    print(f"\n{arguments.rounds} alternating rounds, load average {load[0]:.2f} {load[1]:.2f}")
    print("| command | before median (min-max) | after median (min-max) | after/before |")
    print("|---|---|---|---|")
    for name, by_tree in measured.items():
        cells = [
            f"{statistics.median(values):.3f} s ({min(values):.3f}-{max(values):.3f})"
            for values in by_tree.values()
        ]
        ratio = statistics.median(by_tree["after"]) / statistics.median(by_tree["before"])
        print(f"| pcache {name} | {cells[0]} | {cells[1]} | {ratio:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
