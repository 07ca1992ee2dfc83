"""Lint against the tokenizer's floor: `pcache lint` of a log, and the time it takes to encode
the log's unique text once with the same tokenizer, in the same run.

    python bench/lint_floor.py                                   # 10,000 single-turn requests
    python bench/lint_floor.py --shape sessions --requests 5000
    python bench/lint_floor.py --log my.jsonl -t o200k_base      # a log of your own
    python bench/lint_floor.py --against /tmp/old --repeat 5     # vs another tree, alternately

The unique text is what lint encodes: every request rendered by the tokenizer's renderer and
cut where lint's segment cache cuts it (between special tokens), each distinct piece once.
The floor is one encoding of those pieces with the same tiktoken encoding, on one thread
(`encode_ordinary` per piece, as lint's encoder does within a batch), in a fresh process,
timed from the first piece to the last: wall and CPU seconds (`time.process_time`), the
collection of the pieces and the start of the process not included. Lint is the whole command
(`pcache lint LOG --format json --exit-zero`, start of the process included) under
/usr/bin/time: wall and user + system CPU seconds of it and its children (the forked token
stage included), peak RSS. Lint runs its default executor and jobs (one per core), so its
wall time can come under the single-threaded floor's on an idle machine; the CPU ratio says
how much work lint does beyond the encoding, whatever the load.

Each round runs, each in a fresh process and in this order: this tree's lint, the floor, and
with `--against DIR` (another checkout: `git archive OLD | tar -x -C DIR`) that tree's lint;
the JSON outputs of the two trees are compared byte for byte (`cmp`). Figures are medians
over the rounds with min-max; ratios are taken within each round. The load average is printed
with every round: on a shared machine compare CPU seconds.
"""

from __future__ import annotations

import argparse
import filecmp
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

FLOOR = """
import sys, time
from pcache.prompt.reading.held import iter_requests
from pcache.prompt.renderers.render import resolve_renderer
from pcache.prompt.tokenizers.segment_cache import SegmentCachedRenderer
from pcache.settings import Settings

log, tokenizer = sys.argv[1], sys.argv[2]
renderer = SegmentCachedRenderer(resolve_renderer(tokenizer))
options = Settings(tokenizer=tokenizer).render_options()
pieces = {}
for request in iter_requests(log):
    try:
        text, _ = renderer.render_text(request, options)
    except Exception:
        continue
    parts = renderer.segments(text)
    for piece in parts[::2] if parts is not None else (text,):
        pieces[piece] = None
encoding = renderer.inner.encoding
encode = encoding.encode_ordinary
texts = [piece for piece in pieces if piece]
wall, cpu = time.perf_counter(), time.process_time()
tokens = sum(len(encode(text)) for text in texts)
wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
characters = sum(map(len, texts))
print(f"{wall} {cpu} {tokens} {len(texts)} {characters} {encoding.name}")
"""


def environment(root: Path) -> dict[str, str]:
    scratch = Path(tempfile.gettempdir()) / "pcache-bench-pyc" / str(abs(hash(str(root))))
    values = dict(os.environ, PYTHONPATH=str(root), HF_HUB_OFFLINE="1")
    values["PYTHONPYCACHEPREFIX"] = str(scratch)  # compiled once, as an installed package is
    values.pop("PYTHONDONTWRITEBYTECODE", None)
    return values


def compile_tree(root: Path) -> None:
    """Compile the tree's modules into its scratch cache before the timed runs."""
    command = [sys.executable, "-m", "compileall", "-q", str(root / "pcache")]
    subprocess.run(command, check=True, env=environment(root), stdout=subprocess.DEVNULL)


def lint(log: Path, tokenizer: str, root: Path, out: Path, extra: list[str]) -> dict:
    import bench_lint

    command = [sys.executable, "-m", "pcache", "lint", str(log), "--tokenizer", tokenizer]
    command += ["--format", "json", "--exit-zero", *extra]
    bench_lint.ENVIRONMENT = environment(root)  # what `timed` runs the command with
    wall, cpu, rss, stdout = bench_lint.timed(command, root)
    out.write_text(stdout)
    return {"wall_s": wall, "cpu_s": cpu, "rss_mib": rss}


def floor(log: Path, tokenizer: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", FLOOR, str(log), tokenizer],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=environment(ROOT),
    )
    if done.returncode != 0:
        raise SystemExit(done.stderr[-3000:])
    wall, cpu, tokens, pieces, characters, name = done.stdout.split()
    return {
        "wall_s": float(wall),
        "cpu_s": float(cpu),
        "tokens": int(tokens),
        "pieces": int(pieces),
        "characters": int(characters),
        "encoding": name,
    }


def spread(values: list[float], digits: int = 2) -> str:
    middle = statistics.median(values)
    return f"{middle:.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def load() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log", type=Path, help="a log to lint (default: a generated one)")
    parser.add_argument("--shape", choices=("single", "sessions", "breakers"), default="single")
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("-t", "--tokenizer", default="gpt-oss")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--against", type=Path, help="another checkout, linted alternately")
    parser.add_argument("--lint-args", default="", help="more options for both trees' lint")
    args = parser.parse_args()
    extra = args.lint_args.split()
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        log = args.log
        if log is None:
            import bench_lint

            log = folder / f"{args.shape}.jsonl"
            writer = {
                "single": bench_lint.generate_single,
                "breakers": bench_lint.generate_breakers,
            }.get(args.shape, bench_lint.generate)
            writer(log, args.requests)
        size = log.stat().st_size / 2**20
        print(f"log {log.name}: {size:.0f} MiB; {os.cpu_count()} CPUs; load {load()}")
        for root in (ROOT, args.against):
            if root is not None:
                compile_tree(root)
        rounds = []
        for number in range(args.repeat):
            row = {"lint": lint(log, args.tokenizer, ROOT, folder / "this.json", extra)}
            row["floor"] = floor(log, args.tokenizer)
            if args.against is not None:
                that = folder / "that.json"
                row["against"] = lint(log, args.tokenizer, args.against, that, extra)
                row["same"] = filecmp.cmp(folder / "this.json", that, shallow=False)
            row["load"] = os.getloadavg()[0]
            rounds.append(row)
            shown = ", ".join(
                f"{name} {row[name]['wall_s']:.2f}s wall {row[name]['cpu_s']:.2f}s CPU"
                for name in ("lint", "floor", "against")
                if name in row
            )
            print(f"round {number + 1}: {shown}; load {load()}", flush=True)
        report(args, rounds)


def report(args, rounds: list[dict]) -> None:
    first = rounds[0]["floor"]
    print(
        f"unique text: {first['pieces']:,} pieces, {first['characters']:,} characters,"
        f" {first['tokens']:,} tokens ({first['encoding']}, one thread)"
    )
    print(f"medians of {len(rounds)} rounds (min-max); load {spread([r['load'] for r in rounds])}")
    for name in ("floor", "lint", "against"):
        if name not in rounds[0]:
            continue
        runs = [row[name] for row in rounds]
        rss = f", peak RSS {spread([r['rss_mib'] for r in runs], 0)} MiB" if name != "floor" else ""
        label = {"lint": "lint (this tree)", "against": f"lint ({args.against})"}.get(name, name)
        print(
            f"  {label}: wall {spread([r['wall_s'] for r in runs])} s,"
            f" CPU {spread([r['cpu_s'] for r in runs])} s{rss}"
        )
    for name in ("lint", "against"):
        if name not in rounds[0]:
            continue
        for measure in ("wall_s", "cpu_s"):
            ratios = [row[name][measure] / row["floor"][measure] for row in rounds]
            print(f"  {name} / floor, {measure[:-2]}: {spread(ratios)}")
    if "against" in rounds[0]:
        for measure in ("wall_s", "cpu_s", "rss_mib"):
            ratios = [row["lint"][measure] / row["against"][measure] for row in rounds]
            print(f"  this tree / that tree, {measure[:-2]}: {spread(ratios, 3)}")
        same = all(row["same"] for row in rounds)
        print(f"  JSON outputs identical (cmp) in every round: {same}")


if __name__ == "__main__":
    main()
