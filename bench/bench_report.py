"""`pcache report` on the 10,000-request log of bench_lint.py: time, memory, page size, and
how long headless Chromium takes from navigation to the load event (layout forced).

    python bench/bench_report.py                        # 10,000 requests
    python bench/bench_report.py --requests 2000 --loads 5
    python bench/bench_report.py --screenshot docs/report.png   # docs/report.md's image

Beside it, the same log through `pcache lint --format json` and `pcache replay
--capacity-sweep --format json` (the two computations the report shows). `--repeat N` runs
`pcache report` and `pcache lint` N times, alternately, and prints their medians (min-max) and
the median of the per-round ratio report / lint; `--against DIR` (another checkout, e.g.
`git archive OLD | tar -x -C DIR`) runs that tree's two commands in each round too, right after
this tree's. The load average before and after is printed. Chromium loads the page `--loads`
times (median, min and max). Nothing is asserted.

    python bench/bench_report.py --repeat 3 --against /tmp/old --no-browser
    python bench/bench_report.py --repeat 3 --shape single --fixture llama3.2 --no-browser

`--shape` picks bench_lint.py's log (`sessions`, the default, or `single`: one shared ~1,500-token
system prompt, a ~500-token user turn of its own per request); `--tokenizer` names what both
commands tokenize with (gpt-oss by default), `--fixture NAME` one of the tokenizer dirs
tests/fixtures/build_tokenizers.py builds (e.g. llama3.2).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_lint import generate, generate_single  # noqa: E402

from tests.browser import find_chromium, load, screenshot  # noqa: E402


def timed(*arguments: str, root: Path = ROOT) -> tuple[float, float]:
    """Wall seconds and peak RSS (MiB) of `python -m pcache ARGUMENTS` (in checkout `root`);
    its CPU seconds (user + system) are in `LAST_CPU`."""
    env = dict(os.environ, PYTHONPATH=str(root), HF_HUB_OFFLINE="1")
    if arguments[0] in ("report", "lint", "replay") and len(arguments) > 2:
        arguments = (*arguments, "--tokenizer", TOKENIZER[0])
    command = ["/usr/bin/time", "-v", sys.executable, "-m", "pcache", *arguments]
    result = subprocess.run(command, capture_output=True, text=True, env=env, cwd=root)
    if result.returncode not in (0, 1):
        raise SystemExit(result.stderr[-2000:])
    wall = re.search(r"Elapsed \(wall clock\) time.*: (?:(\d+):)?(\d+):([\d.]+)", result.stderr)
    hours, minutes, seconds = wall.groups()
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", result.stderr)
    total = int(hours or 0) * 3600 + int(minutes) * 60 + float(seconds)
    user = re.search(r"User time \(seconds\): ([\d.]+)", result.stderr)
    system = re.search(r"System time \(seconds\): ([\d.]+)", result.stderr)
    LAST_CPU[0] = float(user.group(1)) + float(system.group(1))
    return total, int(rss.group(1)) / 1024


LAST_CPU = [0.0]
TOKENIZER = ["gpt-oss"]
"""What `timed` passes as --tokenizer to report, lint and replay."""


def take_screenshot(output: Path) -> None:
    browser = find_chromium()
    if browser is None:
        raise SystemExit("no chromium installed (apt-get install chromium)")
    with tempfile.TemporaryDirectory() as folder:
        page = Path(folder) / "report.html"
        timed("report", "samples/prompts", "-o", str(page))
        screenshot(browser, page, output, width=1280, height=1500)
    print(f"wrote {output}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--loads", type=int, default=3, help="Chromium loads (median reported)")
    parser.add_argument("--screenshot", type=Path, help="only write the samples/ screenshot")
    parser.add_argument("--repeat", type=int, default=0, help="alternating report/lint rounds")
    parser.add_argument("--against", type=Path, help="another checkout, run in each round")
    parser.add_argument("--no-browser", action="store_true", help="skip the Chromium loads")
    parser.add_argument("--shape", choices=("sessions", "single"), default="sessions")
    parser.add_argument("--tokenizer", default="gpt-oss", help="what both commands tokenize with")
    parser.add_argument("--fixture", help="a tests/fixtures tokenizer dir by name (llama3.2)")
    arguments = parser.parse_args()
    if arguments.fixture:
        from tests.fixtures.build_tokenizers import build

        arguments.tokenizer = str(build([arguments.fixture])[arguments.fixture])
    TOKENIZER[0] = arguments.tokenizer
    if arguments.screenshot:
        take_screenshot(arguments.screenshot)
        return
    with tempfile.TemporaryDirectory() as folder:
        log = Path(folder) / "log.jsonl"
        (generate_single if arguments.shape == "single" else generate)(log, arguments.requests)
        page = Path(folder) / "report.html"
        size = log.stat().st_size / 2**20
        print(
            f"log {arguments.shape}: {arguments.requests:,} requests, {size:.1f} MiB;"
            f" tokenizer {arguments.tokenizer}"
        )
        if arguments.repeat:
            alternate(log, page, arguments.repeat, arguments.against)
            return
        for name, command in (
            ("pcache report", ("report", str(log), "-o", str(page))),
            ("pcache lint --format json", ("lint", str(log), "--format", "json")),
            (
                "pcache replay --capacity-sweep",
                ("replay", str(log), "--capacity-sweep", "--format", "json"),
            ),
        ):
            wall, rss = timed(*command)
            print(f"{name:<32} {wall:8.1f} s  {rss:8.0f} MiB peak RSS")
        print(f"page: {page.stat().st_size / 1000:.0f} kB")
        browser = find_chromium()
        if browser is None:
            print("chromium: not installed, no load time")
            return
        runs = [load(browser, page) for _ in range(arguments.loads)]
        times = [run.load_ms for run in runs]
        messages = sum(len(run.console) for run in runs)
        print(
            f"chromium load: median {statistics.median(times):.0f} ms"
            f" (min {min(times):.0f}, max {max(times):.0f}, {len(times)} loads),"
            f" {messages} console messages"
        )


def alternate(log: Path, page: Path, repeat: int, against: Path | None) -> None:
    """`pcache report` and `pcache lint` in turn, `repeat` rounds, this tree then `against`."""
    trees = [("this", ROOT)] + ([("against", against.resolve())] if against else [])
    walls: dict[tuple[str, str], list[float]] = {}
    peaks: dict[tuple[str, str], list[float]] = {}
    cpus: dict[tuple[str, str], list[float]] = {}
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for _ in range(repeat):
        for tree, root in trees:
            for name, command in (
                ("report", ("report", str(log), "-o", str(page))),
                ("lint", ("lint", str(log), "--format", "json")),
            ):
                wall, rss = timed(*command, root=root)
                walls.setdefault((tree, name), []).append(wall)
                peaks.setdefault((tree, name), []).append(rss)
                cpus.setdefault((tree, name), []).append(LAST_CPU[0])
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for tree, _ in trees:
        for name in ("report", "lint"):
            values = walls[(tree, name)]
            cpu = cpus[(tree, name)]
            print(
                f"{tree:<8} pcache {name:<7} wall median {statistics.median(values):7.1f} s"
                f" (min {min(values):.1f}, max {max(values):.1f}),"
                f" CPU median {statistics.median(cpu):.1f} s (min {min(cpu):.1f},"
                f" max {max(cpu):.1f}), peak RSS median"
                f" {statistics.median(peaks[(tree, name)]):.0f} MiB"
            )
        for kind, table in (("wall", walls), ("CPU", cpus)):
            ratios = [
                report / lint
                for report, lint in zip(table[(tree, "report")], table[(tree, "lint")], strict=True)
            ]
            print(
                f"{tree:<8} report / lint ({kind}): median {statistics.median(ratios):.2f}x"
                f" (rounds: {', '.join(f'{ratio:.2f}' for ratio in ratios)})"
            )


if __name__ == "__main__":
    main()
