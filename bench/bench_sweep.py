"""The capacity sweep alone (`pcache replay --capacity-sweep`, `pcache report`'s 9 points) over
bench_lint.py's generated logs, this tree against another checkout, alternately.

    python bench/bench_sweep.py --against /tmp/old              # both shapes, 3 rounds
    python bench/bench_sweep.py --against /tmp/old --shape single --repeat 5

Each round and tree runs one fresh process that reads the log as `pcache replay` does (gpt-oss
tokenizer, block size 16), then times `capacity_sweep(trace, options, 8, keep_requests=True)`
(what the report computes) `--passes` times; the process prints the median of its passes and a
digest of the reports, which must be the same for both trees. Figures are medians over the
rounds (min-max), the ratio (this / that) taken within each round. The load average before
and after is printed: figures are comparable within one run only.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from bench_lint import generate, generate_single  # noqa: E402

CHILD = r"""
import hashlib, json, statistics, sys, time
from pcache.cache.capacity import resolve_model
from pcache.pipeline import Settings
from pcache.replayer.simulate.options import SimulateOptions
from pcache.replayer.simulate.sweep import capacity_sweep
from pcache.traces.readers import read_trace

settings = Settings(tokenizer="gpt-oss")
trace = read_trace(sys.argv[1], settings=settings)
arguments = SimulateOptions(tokenizer_given=True, settings=settings)
options = arguments.simulation_options(resolve_model(arguments.model).kv_bytes_per_token)
times = []
for _ in range(int(sys.argv[2])):
    start = time.perf_counter()
    swept = capacity_sweep(trace, options, 8, True)
    times.append(time.perf_counter() - start)
reports = [report.to_dict() for report in swept.reports] + [swept.unlimited.to_dict()]
requests = [[o.to_dict() for o in r.per_request] for r in (*swept.reports, swept.unlimited)]
text = json.dumps([reports, requests], sort_keys=True).encode()
print(json.dumps({"seconds": statistics.median(times), "digest": hashlib.sha256(text).hexdigest()}))
"""


def run(tree: Path, log: Path, passes: int) -> dict:
    env = dict(os.environ, PYTHONPATH=str(tree), HF_HUB_OFFLINE="1")
    command = [sys.executable, "-c", CHILD, str(log), str(passes)]
    result = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tree)
    if result.returncode:
        raise SystemExit(result.stderr[-2000:])
    return json.loads(result.stdout.splitlines()[-1])


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} (min {min(values):.3f}, max {max(values):.3f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", type=Path, required=True, help="another checkout")
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3, help="rounds")
    parser.add_argument("--passes", type=int, default=3, help="sweeps per process (median)")
    parser.add_argument("--shape", choices=("sessions", "single", "both"), default="both")
    arguments = parser.parse_args()
    shapes = ("sessions", "single") if arguments.shape == "both" else (arguments.shape,)
    with tempfile.TemporaryDirectory() as folder:
        for shape in shapes:
            log = Path(folder) / f"{shape}.jsonl"
            (generate_single if shape == "single" else generate)(log, arguments.requests)
            print(f"log {shape}: {arguments.requests:,} requests")
            print("load average before:", " ".join(f"{x:.2f}" for x in os.getloadavg()))
            this, that, ratios = [], [], []
            for _ in range(arguments.repeat):
                mine = run(ROOT, log, arguments.passes)
                theirs = run(arguments.against, log, arguments.passes)
                if mine["digest"] != theirs["digest"]:
                    raise SystemExit(f"{shape}: the two trees' sweeps differ")
                this.append(mine["seconds"])
                that.append(theirs["seconds"])
                ratios.append(mine["seconds"] / theirs["seconds"])
            print("load average after:", " ".join(f"{x:.2f}" for x in os.getloadavg()))
            print(f"this     sweep s {spread(this)}")
            print(f"against  sweep s {spread(that)}")
            print(
                f"this / against: median {statistics.median(ratios):.3f}x "
                f"(rounds: {', '.join(f'{r:.3f}' for r in ratios)}); same reports"
            )


if __name__ == "__main__":
    main()
