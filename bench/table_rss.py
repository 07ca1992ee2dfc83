"""Peak memory of reading, or linting, a Parquet table of request bodies, by row count.

    python bench/table_rss.py 100000 1000000            # read every request (parse + normalize)
    python bench/table_rss.py --lint 100000 1000000     # `pcache lint` over the table
    python bench/table_rss.py --lint --keep /tmp/pq 100000 1000000   # keep the tables there
    python bench/table_rss.py --lint --smaps 20 1000000  # and resident memory by mapping kind

The table has the shape of an agent's log: conversations of 2 to 12 turns (each request sends
the shared system prompt, the history so far and one new user turn), a new conversation every
`--arrival` seconds and a turn every 20 to 60 seconds, rows in timestamp order (conversations
interleave), each row its own recorder line `{session_id, timestamp, body}`. Each size is
written once (row groups of 50,000 rows; reused from `--keep` when already there), then read in
a fresh process whose peak RSS (GNU time's `%M`) is printed with the wall time and the load
average. `--smaps SECONDS` also prints, every SECONDS of the lint, the rows read so far and the
resident MiB of each kind of mapping in `/proc/PID/smaps` (the brk heap, file-backed, anonymous
reservations of 1 GiB or more, which is how mimalloc, pyarrow's default pool, reserves, and the
other anonymous mappings: Python's arenas and glibc's large blocks) with pyarrow's pool bytes.
"""

from __future__ import annotations

import argparse
import heapq
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GROUP_ROWS = 50_000
START_MS = 1_790_000_000_000.0
SYSTEM = (
    "You are the support assistant of ACME Corp. Answer questions about orders, shipping,"
    " returns, invoices and accounts. Be brief and exact; quote order numbers as given; never"
    " promise refunds; hand over to a person when the customer asks for one. "
) * 4
TOPICS = ("order", "invoice", "return", "parcel", "account", "refund", "address", "voucher")
READ = (
    "import sys\n"
    "from pcache.prompt.reading.held import iter_requests\n"
    "count = sum(1 for _ in iter_requests(sys.argv[1]))\n"
    "print(count)\n"
)
SAMPLED = """
import os, sys, threading, time
import pyarrow
import pcache.prompt.reading.tables as tables

every, rows, reading = float(sys.argv.pop(1)), [0], tables.iter_table_documents

def counted(*arguments, **options):
    for document in reading(*arguments, **options):
        rows[0] += 1
        yield document

def kind(size, name):
    if name == "[heap]":
        return "heap"
    if not name:
        return "anon_1g" if size >= 1 << 30 else "anon"
    return "file" if name.startswith("/") else "other"

def sample():
    resident, size, name = {}, 0, ""
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            fields = line.split()
            if "-" in fields[0] and not fields[0].endswith(":"):
                start, end = (int(part, 16) for part in fields[0].split("-"))
                size, name = end - start, " ".join(fields[5:])
            elif fields[0] == "Rss:":
                key = kind(size, name)
                resident[key] = resident.get(key, 0) + int(fields[1])
    kinds = ("heap", "anon", "anon_1g", "file")
    parts = " ".join(f"{key}={resident.get(key, 0) >> 10}" for key in kinds)
    pool = pyarrow.default_memory_pool().bytes_allocated() >> 20
    total = sum(resident.values()) >> 10
    line = f"smaps rows={rows[0]} rss={total} {parts} pool={pool}"
    print(line, file=sys.stderr, flush=True)

def sampler():
    while True:
        time.sleep(every)
        sample()

tables.iter_table_documents = counted
threading.Thread(target=sampler, daemon=True).start()
from pcache.cli.app import main
sys.argv[0] = "pcache"
main()
"""


def conversation_rows(session: int, start_ms: float, chooser: random.Random):
    """(timestamp, line) of each request of one conversation."""
    turns = chooser.randint(2, 12)
    messages: list[dict[str, str]] = [{"role": "system", "content": SYSTEM}]
    moment = start_ms
    for turn in range(turns):
        topic = TOPICS[chooser.randrange(len(TOPICS))]
        number = chooser.randrange(10**6)
        messages.append({"role": "user", "content": f"Turn {turn}: where is my {topic} {number}?"})
        line = {
            "session_id": f"c{session}",
            "timestamp": moment,
            "body": {"model": "gpt-5", "messages": list(messages)},
        }
        yield moment, json.dumps(line)
        messages.append(
            {"role": "assistant", "content": f"Your {topic} {number} is on its way ({turn})."}
        )
        moment += chooser.uniform(20_000.0, 60_000.0)


def rows_in_time_order(rows: int, arrival_s: float, seed: int = 0) -> Iterator[str]:
    """`rows` recorder lines in timestamp order, conversations interleaved."""
    chooser = random.Random(seed)
    pending: list[tuple[float, int, str]] = []
    conversations: list[Iterator[tuple[float, str]]] = []
    session = 0
    emitted = 0
    next_start = START_MS
    while emitted < rows:
        while not pending or next_start <= pending[0][0]:
            conversation = conversation_rows(session, next_start, chooser)
            conversations.append(conversation)
            moment, line = next(conversation)
            heapq.heappush(pending, (moment, session, line))
            session += 1
            next_start += arrival_s * 1000.0
        moment, owner, line = heapq.heappop(pending)
        yield line
        emitted += 1
        following = next(conversations[owner], None)
        if following is not None:
            heapq.heappush(pending, (following[0], owner, following[1]))
        else:
            conversations[owner] = iter(())


def write_table(rows: int, path: Path, arrival_s: float) -> None:
    import pyarrow as pa
    import pyarrow.parquet as parquet

    writer = None
    lines = rows_in_time_order(rows, arrival_s)
    for start in range(0, rows, GROUP_ROWS):
        bodies = [next(lines) for _ in range(min(rows, start + GROUP_ROWS) - start)]
        table = pa.table({"body": bodies})
        if writer is None:
            writer = parquet.ParquetWriter(path, table.schema)
        writer.write_table(table, row_group_size=GROUP_ROWS)
    assert writer is not None
    writer.close()


def measure(
    path: Path, lint: bool, profile: str, smaps: float | None = None
) -> tuple[float, float, str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    if lint:
        start = ["-m", "pcache"] if smaps is None else ["-c", SAMPLED, str(smaps)]
        command = [sys.executable, *start, "lint", str(path), "-t", "o200k_base"]
        command += ["--profile", profile, "--format", "concise", "--exit-zero"]
    else:
        command = [sys.executable, "-c", READ, str(path)]
    started = time.perf_counter()
    done = subprocess.run(
        ["/usr/bin/time", "-f", "%M", *command], env=env, capture_output=True, text=True
    )
    seconds = time.perf_counter() - started
    assert done.returncode == 0, done.stderr
    *samples, peak = done.stderr.strip().splitlines()
    for line in samples:
        if line.startswith("smaps "):
            print(line)
    peak_kib = int(peak)
    lines = done.stdout.strip().splitlines()
    return peak_kib / 1024, seconds, f"{len(lines)} output lines"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("rows", type=int, nargs="+")
    parser.add_argument("--lint", action="store_true")
    parser.add_argument("--profile", default="openai")
    parser.add_argument("--arrival", type=float, default=2.0, help="seconds between sessions")
    parser.add_argument("--keep", type=Path, help="folder to write the tables to and keep")
    parser.add_argument("--smaps", type=float, help="with --lint: sample smaps every SECONDS")
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        folder = arguments.keep or Path(scratch)
        folder.mkdir(parents=True, exist_ok=True)
        for rows in arguments.rows:
            path = folder / f"agent-{rows}-{arguments.arrival:g}s.parquet"
            if not path.exists():
                write_table(rows, path, arguments.arrival)
            peak_mib, seconds, last = measure(
                path, arguments.lint, arguments.profile, arguments.smaps
            )
            load = " ".join(f"{value:.2f}" for value in os.getloadavg())
            print(f"rows={rows} peak_rss={peak_mib:.0f} MiB wall={seconds:.1f}s load={load} {last}")
            if arguments.keep is None:
                path.unlink()


if __name__ == "__main__":
    main()
