"""Replay speed of `pcache replay --simulate` against a plain dict + OrderedDict LRU.

Both implement the same rules (hash-id traces, serial): a request hits its longest run of
leading block ids; misses take never-used blocks first, then evict the least recently
released; a finished request's blocks go to the back of the LRU, last block first.
The two must report the same hit tokens and evictions; the script fails if they do not.
pcache pauses the cyclic garbage collector while it replays; the last two columns time the
reference paused the same way, so that the ratio there compares the data structures alone.

Usage (each measurement is the median of --repeat runs, single process):
    python bench/replay_speed.py ../shared/traces/mooncake/conversation_trace.jsonl \
        --capacities 0,50000,5000
    python -m pcache trace synth -n 1000000 --output-format hash-ids --system-len 48 \
        --question-len 16 --groups 2000 --prompts-per-group 500 --zipf-alpha 1.1 -o /tmp/1m.jsonl
    /usr/bin/time -v python bench/replay_speed.py /tmp/1m.jsonl --capacities 0,200000 --repeat 1
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import OrderedDict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pcache.process.gc_pause import paused_gc
from pcache.replayer.simulate.driver import SimulationOptions, simulate
from pcache.traces.readers import read_trace


def reference_lru(records, capacity: int, block_size: int) -> tuple[int, int]:
    """(hit tokens, evicted blocks) with a dict of hash -> slots and an OrderedDict LRU."""
    empty = capacity
    lru: OrderedDict = OrderedDict()  # slot -> hash, unreferenced, next evicted first
    by_hash: dict = {}
    next_slot = evicted = hit_tokens = 0
    for record in records:
        hashes = record.hash_ids
        slots = []
        for block_hash in hashes:
            holders = by_hash.get(block_hash)
            if not holders:
                break
            slots.append(holders[0])
        num_hits = len(slots)
        for slot in slots:
            lru.pop(slot, None)
        for block_hash in hashes[num_hits:]:
            if empty:
                empty -= 1
            else:
                old_slot, old_hash = lru.popitem(last=False)
                holders = by_hash[old_hash]
                holders.remove(old_slot)
                if not holders:
                    del by_hash[old_hash]
                evicted += 1
            next_slot += 1
            slots.append(next_slot)
            by_hash.setdefault(block_hash, []).append(next_slot)
        for index in range(len(slots) - 1, -1, -1):
            lru[slots[index]] = hashes[index]
            lru.move_to_end(slots[index])
        hit_tokens += min(num_hits * block_size, record.input_length)
    return hit_tokens, evicted


def median_time(function, repeat: int):
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = function()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace")
    parser.add_argument("--capacities", default="0", help="blocks; 0 means unlimited")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    read_seconds, trace = median_time(lambda: read_trace(args.trace), 1)
    blocks = sum(len(r.hash_ids) for r in trace.records)
    tokens = sum(r.input_length for r in trace.records)
    print(
        f"{args.trace}: {len(trace.records):,} requests, {blocks:,} blocks of"
        f" {trace.block_size}, {tokens:,} tokens; read in {read_seconds:.2f} s"
    )
    print(
        f"{'capacity':>10} {'hit rate':>9} {'evicted':>10} {'pcache s':>9}"
        f" {'reference s':>12} {'ratio':>6} {'ref no-gc s':>12} {'ratio':>6}"
    )
    for capacity in (int(c) for c in args.capacities.split(",")):
        options = SimulationOptions(cache_blocks=capacity or None)
        seconds, report = median_time(lambda o=options: simulate(trace, o), args.repeat)
        limit = capacity or blocks
        ref_seconds, (ref_hits, ref_evicted) = median_time(
            lambda c=limit: reference_lru(trace.records, c, trace.block_size), args.repeat
        )
        assert (report.hit_tokens, report.evicted_blocks) == (ref_hits, ref_evicted), (
            report.hit_tokens,
            ref_hits,
            report.evicted_blocks,
            ref_evicted,
        )
        with paused_gc():
            quiet_seconds, _ = median_time(
                lambda c=limit: reference_lru(trace.records, c, trace.block_size), args.repeat
            )
        print(
            f"{capacity or 'unlimited':>10} {report.token_hit_rate:>9.4f}"
            f" {report.evicted_blocks:>10,} {seconds:>9.2f} {ref_seconds:>12.2f}"
            f" {seconds / ref_seconds:>6.2f} {quiet_seconds:>12.2f}"
            f" {seconds / quiet_seconds:>6.2f}"
        )


if __name__ == "__main__":
    main()
