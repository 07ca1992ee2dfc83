"""Every router on three workloads at 8 replicas, serial and timed: hit rate, predicted TTFT,
load imbalance and router precision (`pcache replay --simulate --replicas 8 --router ...`).

Workloads:
- `gsp`: the generated-shared-prefix workload of SGLang's router benchmark (`bench_serving
  --dataset-name generated-shared-prefix` defaults): 64 groups x 16 prompts, a 2,048-token
  system prompt per group, a 128-token question per prompt, 256 output tokens, the 1,024
  prompts shuffled (seeded) and all sent at once. Written as a hash-id trace of 16-token
  blocks: 128 blocks of system prompt shared by a group, 8 of question of its own.
- the two Mooncake traces (`conversation_trace.jsonl`, `synthetic_trace.jsonl`, 512-token
  blocks) from `--traces` (default: the project's shared/traces/mooncake when present, else the
  600-line heads in tests/data/mooncake).

Modes: `serial` (each request finishes before the next: no load, no request in flight),
`timed` with `--publish-blocks scheduled` (vLLM's rule: a request's blocks are hits from its
admission), `timed` with `prefilled` (SGLang's: from the end of its prefill), with every
prefill starting at its arrival, and `prefilled` with `--prefill-slots K` (default 8: at most
K prefills at once per replica, about what SGLang's default 16,384-token prefill batch holds
of 2,176-token prompts). Timed replays use the default TTFT model (55 ms + 0.05 ms per
uncached token + 1e-6 ms per pair) and 50 tokens/s decode; caches are unlimited unless
`--cache-blocks` is given. A last table sweeps K for three routers on `gsp`. Every figure is
a deterministic simulation: rerunning gives the same tables.

Usage:
    python bench/router_study.py                       # all three workloads
    python bench/router_study.py --workloads gsp --json gsp.json
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pcache.replayer.fleet.driver import simulate_fleet  # noqa: E402
from pcache.replayer.fleet.report import grid_rows  # noqa: E402
from pcache.replayer.fleet.routers import ROUTERS  # noqa: E402
from pcache.replayer.simulate.driver import SimulationOptions, simulate  # noqa: E402
from pcache.traces.readers import read_trace  # noqa: E402
from pcache.traces.record import Trace, TraceRecord  # noqa: E402

SHARED = next(
    (
        folder / "shared" / "traces" / "mooncake"
        for folder in (ROOT.parent, ROOT.parent.parent)
        if (folder / "shared" / "traces" / "mooncake").is_dir()
    ),
    ROOT.parent / "shared" / "traces" / "mooncake",
)
HEADS = ROOT / "tests" / "data" / "mooncake"
SLOTS_SWEEP = (1, 2, 4, 8, 16, 32, 64)
SWEPT_ROUTERS = ("round-robin", "sglang", "precise")


def modes(slots: int) -> dict[str, dict]:
    return {
        "serial": {"concurrency": "serial"},
        "timed, scheduled": {"concurrency": "timed", "publish_blocks": "scheduled"},
        "timed, prefilled": {"concurrency": "timed", "publish_blocks": "prefilled"},
        f"timed, prefilled, {slots} slots": {
            "concurrency": "timed",
            "publish_blocks": "prefilled",
            "prefill_slots": slots,
        },
    }


def generated_shared_prefix(
    groups: int = 64,
    prompts_per_group: int = 16,
    system_tokens: int = 2048,
    question_tokens: int = 128,
    output_tokens: int = 256,
    block_size: int = 16,
    seed: int = 1,
) -> Trace:
    """SGLang's generated-shared-prefix workload as a hash-id trace, all sent at time 0."""
    assert system_tokens % block_size == 0 and question_tokens % block_size == 0
    system_blocks, question_blocks = system_tokens // block_size, question_tokens // block_size
    prompts = []
    next_id = 0
    for _ in range(groups):
        system = list(range(next_id, next_id + system_blocks))
        next_id += system_blocks
        for _ in range(prompts_per_group):
            prompts.append(system + list(range(next_id, next_id + question_blocks)))
            next_id += question_blocks
    random.Random(seed).shuffle(prompts)  # bench_serving shuffles the requests
    length = system_tokens + question_tokens
    records = [
        TraceRecord(index, index + 1, 0.0, length, output_tokens, None, ids)
        for index, ids in enumerate(prompts)
    ]
    return Trace(f"generated-shared-prefix {groups}x{prompts_per_group}", "mooncake", 16, records)


def workloads(names: list[str], traces: Path) -> dict[str, Trace]:
    chosen = {}
    for name in names:
        if name == "gsp":
            chosen[name] = generated_shared_prefix()
            continue
        path = traces / f"{name}_trace.jsonl"
        if not path.exists():
            path = HEADS / f"{name}_head.jsonl"
        chosen[name] = read_trace(path)
    return chosen


def study(
    trace: Trace, replicas: int, cache_blocks: int | None, chosen: dict[str, dict]
) -> list[tuple[str, list]]:
    """(mode, the report of every router) per mode."""
    results = []
    for mode, values in chosen.items():
        options = replace(SimulationOptions(cache_blocks=cache_blocks), **values)
        reports = [simulate_fleet(trace, options, replicas, router) for router in ROUTERS]
        results.append((mode, reports))
    return results


def table(name: str, trace: Trace, results, single: dict[str, float]) -> str:
    lines = [
        f"## {name}: {trace.source}, {len(trace.records):,} requests",
        "",
        "one instance: " + ", ".join(f"{mode} {rate:.3f}" for mode, rate in single.items()),
        "",
        "| router | mode | hit rate | TTFT p50 / p90 (ms) | imbalance (req / tok) |"
        " misrouted | tokens lost |",
        "|---|---|---|---|---|---|---|",
    ]
    for router in ROUTERS:
        for mode, reports in results:
            row = next(row for row in grid_rows(reports) if row.router == router)
            lines.append(
                f"| {router} | {mode} | {row.token_hit_rate:.3f} |"
                f" {row.ttft_p50_ms:,.1f} / {row.ttft_p90_ms:,.1f} |"
                f" {row.request_imbalance:.2f} / {row.token_imbalance:.2f} |"
                f" {row.misrouted_share:.1%} | {row.misrouted_tokens:,} |"
            )
    return "\n".join(lines)


def slots_sweep(trace: Trace, replicas: int) -> str:
    """Hit rate and TTFT p50 against `--prefill-slots`, prefilled publication."""
    lines = [
        f"## gsp: `--publish-blocks prefilled` against `--prefill-slots K`, {replicas} replicas",
        "",
        "| K | " + " | ".join(f"{router} hit rate, TTFT p50" for router in SWEPT_ROUTERS) + " |",
        "|---|" + "---|" * len(SWEPT_ROUTERS),
    ]
    for slots in SLOTS_SWEEP:
        options = SimulationOptions(
            concurrency="timed", publish_blocks="prefilled", prefill_slots=slots
        )
        cells = []
        for router in SWEPT_ROUTERS:
            report = simulate_fleet(trace, options, replicas, router)
            cells.append(f"{report.token_hit_rate:.3f}, {report.ttft_ms['p50']:,.0f} ms")
        lines.append(f"| {slots} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workloads", default="gsp,conversation,synthetic")
    parser.add_argument("--traces", type=Path, default=SHARED)
    parser.add_argument("--replicas", type=int, default=8)
    parser.add_argument("--cache-blocks", type=int, default=None, help="per replica")
    parser.add_argument("--prefill-slots", type=int, default=8)
    parser.add_argument("--json", type=Path, default=None, help="write every report here")
    args = parser.parse_args()
    chosen = modes(args.prefill_slots)
    everything = {}
    loaded = workloads(args.workloads.split(","), args.traces)
    for name, trace in loaded.items():
        started = time.perf_counter()
        single = {
            mode: simulate(
                trace, replace(SimulationOptions(cache_blocks=args.cache_blocks), **values)
            ).token_hit_rate
            for mode, values in chosen.items()
        }
        results = study(trace, args.replicas, args.cache_blocks, chosen)
        print(table(name, trace, results, single))
        print(f"\n({time.perf_counter() - started:.1f} s)\n", flush=True)
        everything[name] = {
            mode: [report.to_dict() for report in reports] for mode, reports in results
        }
    if "gsp" in loaded:
        print(slots_sweep(loaded["gsp"], args.replicas), flush=True)
    if args.json is not None:
        import orjson

        args.json.write_bytes(orjson.dumps(everything, option=orjson.OPT_SORT_KEYS))


if __name__ == "__main__":
    main()
