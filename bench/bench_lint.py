"""Lint throughput: a generated log of N requests (~2,000 tokens each, shared system prompt),
linted with the embedded gpt-oss renderer and with a real Hugging Face template side by side.

    python bench/bench_lint.py                        # 10,000 requests, gpt-oss + Llama 3.1
    python bench/bench_lint.py --requests 2000 --repeat 5
    python bench/bench_lint.py --kvlint /path/to/kvlint   # also kvlint on the same log + model
    python bench/bench_lint.py --against /tmp/old --shape single   # vs another tree, alternately
    python bench/bench_lint.py --against /tmp/old --kvlint kvlint  # both shapes, old vs new, kvlint
    python bench/bench_lint.py --against /tmp/old --shape single --fixture llama3.2

The Hugging Face model is the Llama 3.1 fixture dir (its tokenizer converted from Meta's
tiktoken file, its chat template TRL's copy of the original; built offline from pinned wheels
by tests/fixtures/build_tokenizers.py), another fixture dir with `--fixture` (llama3.2, qwen2.5,
qwen3), or any dir given with `--hf-model`.

Two shapes of log, both by default (`--shape`): `sessions` (conversations of 4-16 turns, every
request repeating its history) and `single` (10,000 single-turn requests sharing one ~1,500-token
system prompt, each with its own ~500-token user turn, so most text is unique); `breakers` (or
`all` for the three) is `sessions` with a clock line in every system prompt and each session's
tools in its own order, so that lint finds fixes and replays the fixed log. With
`--against DIR` (another checkout, e.g. `git archive OLD | tar -x -C DIR`) each round also runs
that tree's `pcache lint` (and its stage timing) on the same log right after this one's, and the
ratios (this / that) are taken within each round.

Each round runs, in this order and each in a fresh process: `pcache lint LOG --format json` for
every tokenizer under `/usr/bin/time -v` (wall time, user + system CPU time, peak RSS), the same
lint in process with its time per stage (read, render+tokenize, rules, cost), and kvlint if
given (`kvlint lint LOG --model DIR`, its defaults: vLLM block size 16, no KV budget). Figures
are medians over the rounds with min-max; the kvlint ratios are taken within each round, then
their median. On a shared machine the CPU time says what the wall time would be alone. Nothing
is asserted. The load average before and after is printed: the figures are only comparable
within one run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, os.environ.get("PCACHE_BENCH_TREE", str(ROOT)))

WORDS = [
    "cache",
    "prefix",
    "token",
    "block",
    "request",
    "session",
    "agent",
    "tool",
    "schema",
    "prompt",
    "history",
    "turn",
    "reply",
    "server",
    "engine",
    "model",
    "latency",
    "budget",
    "order",
    "invoice",
    "shipping",
    "return",
    "refund",
    "customer",
    "account",
    "report",
    "metric",
    "error",
    "retry",
    "window",
    "stride",
    "summary",
    "context",
]
HF_LABEL = "HF template"
ENVIRONMENT = dict(os.environ, PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1")
ENVIRONMENT.setdefault("TRANSFORMERS_VERBOSITY", "error")


def sentence(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words)).capitalize() + "."


def system_prompt(rng: random.Random, target_words: int = 1370) -> str:
    parts, count = [], 0
    while count < target_words:
        words = rng.randint(8, 20)
        parts.append(sentence(rng, words))
        count += words
        if rng.random() < 0.15:
            parts.append("\n\n")
    return " ".join(parts)


def generate_single(path: Path, num_requests: int, seed: int = 7) -> None:
    """Single-turn requests: one shared system prompt and tools, a unique ~500-word user turn."""
    rng = random.Random(seed)
    system = system_prompt(rng)
    with path.open("w") as out:
        for number in range(num_requests):
            line = {
                "request_id": f"r{number}",
                "session_id": f"s{number}",
                "model": "gpt-oss-120b",
                "messages": [
                    {"role": "system", "content": system},
                    {"role": "user", "content": f"{number}: " + sentence(rng, 400)},
                ],
            }
            out.write(json.dumps(line) + "\n")


def generate_breakers(path: Path, num_requests: int, seed: int = 7) -> None:
    """`generate`'s sessions with two cache breakers: a clock line in every request's system
    prompt, and each session's tools in an order of its own (lint replays a fixed log)."""
    generate(path, num_requests, seed, breakers=True)


def generate(path: Path, num_requests: int, seed: int = 7, breakers: bool = False) -> None:
    """Sessions of 4-16 requests; each request repeats its session's history and adds a turn.

    One OpenAI chat body per line with `request_id` and `session_id` beside it, a shape both
    pcache and kvlint read."""
    rng = random.Random(seed)
    system = system_prompt(rng)
    head, _, tail = system.partition(". ")
    tools = [
        {
            "type": "function",
            "function": {
                "name": name,
                "description": sentence(rng, 12),
                "parameters": {
                    "properties": {"query": {"type": "string"}},
                    "required": ["query"],
                    "type": "object",
                },
            },
        }
        for name in ("lookup_order", "refund", "search_docs")
    ]
    written = 0
    session = 0
    with path.open("w") as out:
        while written < num_requests:
            session += 1
            turns = rng.randint(4, 16)
            messages = [{"role": "system", "content": system}]
            order = list(tools)
            if breakers:
                rng.shuffle(order)
            budget = 1000  # conversation tokens at the last turn, on top of ~1,500 shared ones
            per_turn = budget // turns
            for _ in range(turns):
                if written >= num_requests:
                    break
                messages.append({"role": "user", "content": sentence(rng, per_turn // 3)})
                sent = list(messages)
                if breakers:
                    clock = f"{9 + written // 3600:02d}:{written // 60 % 60:02d}:{written % 60:02d}"
                    sent[0] = {
                        "role": "system",
                        "content": f"{head}.\nCurrent time: {clock}\n{tail}",
                    }
                line = {
                    "request_id": f"r{written}",
                    "session_id": f"s{session}",
                    "model": "gpt-oss-120b",
                    "messages": sent,
                    "tools": order if breakers else tools,
                }
                out.write(json.dumps(line) + "\n")
                written += 1
                messages.append({"role": "assistant", "content": sentence(rng, per_turn // 2)})


def tree_rss_kib(pid: int) -> int:
    """The resident memory of a process and all its descendants now (KiB; 0 once gone)."""
    total = 0
    pending = [pid]
    while pending:
        process = pending.pop()
        try:
            status = Path(f"/proc/{process}/status").read_text()
            children = Path(f"/proc/{process}/task/{process}/children").read_text().split()
        except OSError:
            continue
        found = re.search(r"^VmRSS:\s+(\d+)", status, re.MULTILINE)
        total += int(found.group(1)) if found else 0
        pending += map(int, children)
    return total


def timed(command: list[str], root: Path = ROOT) -> tuple[float, float, float, str]:
    """Wall seconds, CPU seconds (user + system, children included), peak RSS (MiB) and stdout
    of a command run under /usr/bin/time -v (in the checkout `root`). The peak is the larger of
    time's (the largest single process) and the sum over the process tree sampled every 10 ms
    (lint may fork a child with memory of its own; pages they share count in each)."""
    with subprocess.Popen(
        ["/usr/bin/time", "-v", *command],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=root,
        env={**ENVIRONMENT, "PYTHONPATH": str(root)},
    ) as process:
        import threading

        peak = [0]

        def sample() -> None:
            while process.poll() is None:
                peak[0] = max(peak[0], tree_rss_kib(process.pid))
                time.sleep(0.01)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        stdout, stderr = process.communicate()
        sampler.join()
    result = subprocess.CompletedProcess(command, process.returncode, stdout, stderr)
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{result.stderr[-3000:]}")
    wall = re.search(r"Elapsed \(wall clock\) time.*: (?:(\d+):)?(\d+):([\d.]+)", result.stderr)
    assert wall is not None, result.stderr[-2000:]
    seconds = float(wall.group(1) or 0) * 3600 + float(wall.group(2)) * 60 + float(wall.group(3))
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", result.stderr)
    assert rss is not None
    peak_kib = max(int(rss.group(1)), peak[0])
    cpu = sum(
        float(found.group(1))
        for found in re.finditer(r"(?:User|System) time \(seconds\): ([\d.]+)", result.stderr)
    )
    return seconds, cpu, peak_kib / 1024, result.stdout


def pcache_cli(log: Path, tokenizer: str, root: Path = ROOT) -> dict:
    command = [sys.executable, "-m", "pcache", "lint", str(log), "--tokenizer", tokenizer]
    wall, cpu, rss, stdout = timed([*command, "--format", "json", "--exit-zero"], root)
    summary = json.loads(stdout)["summary"]
    return {"wall_s": wall, "cpu_s": cpu, "rss_mib": rss, "summary": summary}


def pcache_stages(log: Path, tokenizer: str, root: Path = ROOT) -> dict:
    """Time per stage of the same lint, in a fresh process (see `stages_main`), with the
    pcache of the checkout `root`."""
    command = [sys.executable, __file__, "--stages-of", str(log), "--tokenizer", tokenizer]
    environment = {**ENVIRONMENT, "PYTHONPATH": str(root), "PCACHE_BENCH_TREE": str(root)}
    result = subprocess.run(command, capture_output=True, text=True, cwd=root, env=environment)
    if result.returncode != 0:
        raise SystemExit(result.stderr[-3000:])
    return json.loads(result.stdout)


def kvlint_cli(kvlint: str, log: Path, model: str, out: Path) -> dict:
    wall, cpu, rss, _ = timed([kvlint, "lint", str(log), "--model", model, "--json", str(out)])
    report = json.loads(out.read_text())
    rates = {sim["engine"]: round(sim["hit_rate"], 6) for sim in report["sims"]}
    return {"wall_s": wall, "cpu_s": cpu, "rss_mib": rss, "hit_rate": rates}


def stages_main(log: str, tokenizer: str) -> None:
    from pcache.pipeline import Settings
    from pcache.rules import runner
    from pcache.rules.config import LintConfig
    from pcache.rules.runner import LintOptions, _Run

    # as the tree's command line runs the pass: with the collector paused (by lint_paths in
    # older trees, around the command in newer ones)
    pass_context = getattr(runner, "paused_gc", None)
    if pass_context is None:
        from pcache.process.gc_pause import paused_gc as pass_context
    started = time.perf_counter()
    run = _Run(LintOptions(settings=Settings(tokenizer=tokenizer)), LintConfig(), None)
    loaded = time.perf_counter()
    with pass_context():
        run.lint_file(log)
        report = run.finish()
    done = time.perf_counter()
    cache = run.renderer
    stages = {"load": round(loaded - started, 3), **report.summary.stage_seconds}
    print(
        json.dumps(
            {
                "stages_s": stages,
                "lint_s": round(done - loaded, 3),
                "segment_cache": {"hits": cache.hits, "misses": cache.misses},
            }
        )
    )


def spread(values: list[float], digits: int = 2) -> str:
    return (
        f"{statistics.median(values):.{digits}f} ({min(values):.{digits}f}-"
        f"{max(values):.{digits}f})"
    )


def conditions() -> str:
    import tokenizers

    from pcache.process.machine import cpu_name

    return (
        f"{os.cpu_count()} CPUs ({cpu_name()}), Python {platform.python_version()},"
        f" tokenizers {tokenizers.__version__}, load average {os.getloadavg()[0]:.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3, help="rounds (medians reported)")
    parser.add_argument("--hf-model", help="a Hugging Face model dir (default: Llama 3.1 fixture)")
    parser.add_argument("--fixture", default="llama3.1", help="a tests/fixtures dir (llama3.2)")
    parser.add_argument("--only", choices=("gpt-oss", "hf"), help="one tokenizer instead of both")
    parser.add_argument("--kvlint", help="a kvlint executable, run on the same log and model")
    parser.add_argument("--keep", help="write the generated log here instead of a temp folder")
    parser.add_argument(
        "--shape", choices=("sessions", "single", "breakers", "both", "all"), default="both"
    )
    parser.add_argument("--against", help="another checkout whose pcache lint runs alternately")
    parser.add_argument("--stages-of", help=argparse.SUPPRESS)
    parser.add_argument("--tokenizer", default="gpt-oss", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.kvlint and args.only == "gpt-oss":
        parser.error("kvlint is compared with the Hugging Face template: drop --only gpt-oss")
    if args.stages_of:
        stages_main(args.stages_of, args.tokenizer)
        return
    if args.hf_model:
        hf_model = args.hf_model
    else:
        from tests.fixtures.build_tokenizers import build

        hf_model = str(build([args.fixture])[args.fixture])
    tokenizers = {"gpt-oss": "gpt-oss", HF_LABEL: hf_model}
    if args.only:
        wanted = args.only == "gpt-oss"
        tokenizers = {
            label: path for label, path in tokenizers.items() if (label == "gpt-oss") == wanted
        }
    shapes = {"both": ("sessions", "single"), "all": ("sessions", "single", "breakers")}.get(
        args.shape, (args.shape,)
    )
    print(f"before: {conditions()}")
    with tempfile.TemporaryDirectory() as folder:
        for shape in shapes:
            name = f"bench-{shape}.jsonl"
            log = Path(args.keep) / name if args.keep else Path(folder) / name
            writer = {"single": generate_single, "breakers": generate_breakers}.get(shape, generate)
            writer(log, args.requests)
            size = log.stat().st_size / 2**20
            print(f"log {shape}: {args.requests} requests, {size:.0f} MiB; {hf_model}")
            rounds = run_rounds(args, log, tokenizers, hf_model, Path(folder))
            print(f"after {shape}: {conditions()}")
            summarize(args, shape, rounds, tokenizers)


def run_rounds(args, log: Path, tokenizers: dict, hf_model: str, folder: Path) -> list[dict]:
    """The rounds on one log: this tree, then the other (`--against`), then kvlint, per
    tokenizer, alternately."""
    rounds: list[dict] = []
    for number in range(args.repeat):
        row: dict = {}
        for label, tokenizer in tokenizers.items():
            row[label] = pcache_cli(log, tokenizer)
            row[label]["stages"] = pcache_stages(log, tokenizer)
            if args.against:
                other = Path(args.against)
                row[f"{label} against"] = pcache_cli(log, tokenizer, other)
                row[f"{label} against"]["stages"] = pcache_stages(log, tokenizer, other)
        if args.kvlint:
            row["kvlint"] = kvlint_cli(args.kvlint, log, hf_model, folder / "kv.json")
        rounds.append(row)
        walls = ", ".join(f"{label} {row[label]['wall_s']:.1f}s" for label in row)
        print(f"round {number + 1}: {walls}; load average {os.getloadavg()[0]:.2f}")
    return rounds


def summarize(args, shape: str, rounds: list[dict], tokenizers: dict) -> None:
    print(f"{shape}: medians of {args.repeat} rounds (min-max):")
    for label in tokenizers:
        runs = [row[label] for row in rounds]
        summary = runs[0]["summary"]
        tokens = summary["prompt_tokens"]
        print(
            f"  pcache lint, {label}: wall {spread([r['wall_s'] for r in runs], 1)} s,"
            f" CPU {spread([r['cpu_s'] for r in runs], 1)} s,"
            f" peak RSS {spread([r['rss_mib'] for r in runs], 0)} MiB;"
            f" {tokens:,} prompt tokens ({tokens / args.requests:,.0f}/request),"
            f" cacheable {summary['cacheable_ratio']:.2%},"
            f" findings { ({row['code']: row['count'] for row in summary['rules']}) }"
        )
        print(f"    stages (s): {json.dumps(stage_spreads(runs))}")
        print(f"    segment cache: {json.dumps(runs[0]['stages']['segment_cache'])}")
    if args.against:
        print(f"  against {args.against} (this tree / that one, within each round):")
        for label in tokenizers:
            other = [row[f"{label} against"] for row in rounds]
            same = other[0]["summary"] == rounds[0][label]["summary"]
            print(f"    {label}: that tree's stages (s): {json.dumps(stage_spreads(other))}")
            print(f"    {label}: same summary as that tree: {same}")
            for measure in ("wall_s", "cpu_s", "rss_mib"):
                ratios = [row[label][measure] / row[f"{label} against"][measure] for row in rounds]
                print(
                    f"    {label} {measure}: that {spread([r[measure] for r in other], 1)},"
                    f" ratio {spread(ratios, 3)}"
                )
    if args.kvlint:
        runs = [row["kvlint"] for row in rounds]
        print(
            f"  kvlint lint: wall {spread([r['wall_s'] for r in runs], 1)} s,"
            f" CPU {spread([r['cpu_s'] for r in runs], 1)} s,"
            f" peak RSS {spread([r['rss_mib'] for r in runs], 0)} MiB,"
            f" hit rate {runs[0]['hit_rate']}"
        )
        label = HF_LABEL
        for measure in ("wall_s", "cpu_s"):
            ratios = [row[label][measure] / row["kvlint"][measure] for row in rounds]
            print(f"  pcache/kvlint {measure[:-2]} ratio, same log and model: {spread(ratios, 3)}")


def stage_spreads(runs: list[dict]) -> dict[str, str]:
    return {
        stage: spread([run["stages"]["stages_s"][stage] for run in runs])
        for stage in runs[0]["stages"]["stages_s"]
    }


if __name__ == "__main__":
    main()
