"""Peak memory of reading a Parquet table of request bodies, by row count.

    python bench/table_rss.py 100000 1000000            # read every request (parse + normalize)
    python bench/table_rss.py --lint 10000 40000        # `pcache lint` over the table

Each size is written once to a temporary Parquet file (row groups of 50,000 rows; ten-request
conversations with a shared system prompt), then read in a fresh process whose peak RSS
(GNU time's `%M`) is printed with the wall time and the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GROUP_ROWS = 50_000
READ = (
    "import sys\n"
    "from pcache.prompt.inputs import iter_requests\n"
    "count = sum(1 for _ in iter_requests(sys.argv[1]))\n"
    "print(count)\n"
)


def write_table(rows: int, path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as parquet

    writer = None
    for start in range(0, rows, GROUP_ROWS):
        bodies = []
        for index in range(start, min(rows, start + GROUP_ROWS)):
            session = index // 10
            line = {
                "session_id": f"s{session}",
                "body": {
                    "model": "gpt-5",
                    "messages": [
                        {"role": "system", "content": "You are the assistant of ACME support."},
                        {"role": "user", "content": f"Question {index % 10} of {session}"},
                    ],
                },
            }
            bodies.append(json.dumps(line))
        table = pa.table({"body": bodies})
        if writer is None:
            writer = parquet.ParquetWriter(path, table.schema)
        writer.write_table(table, row_group_size=GROUP_ROWS)
    assert writer is not None
    writer.close()


def measure(path: Path, lint: bool) -> tuple[float, float, str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    if lint:
        command = [sys.executable, "-m", "pcache", "lint", str(path), "-t", "o200k_base"]
        command += ["--format", "concise", "--exit-zero"]
    else:
        command = [sys.executable, "-c", READ, str(path)]
    started = time.perf_counter()
    done = subprocess.run(
        ["/usr/bin/time", "-f", "%M", *command], env=env, capture_output=True, text=True
    )
    seconds = time.perf_counter() - started
    assert done.returncode == 0, done.stderr
    peak_kib = int(done.stderr.strip().splitlines()[-1])
    return peak_kib / 1024, seconds, done.stdout.strip().splitlines()[-1]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("rows", type=int, nargs="+")
    parser.add_argument("--lint", action="store_true")
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        for rows in arguments.rows:
            path = Path(directory) / f"t{rows}.parquet"
            write_table(rows, path)
            peak_mib, seconds, last = measure(path, arguments.lint)
            load = " ".join(f"{value:.2f}" for value in os.getloadavg())
            print(f"rows={rows} peak_rss={peak_mib:.0f} MiB wall={seconds:.1f}s load={load} {last}")
            path.unlink()


if __name__ == "__main__":
    main()
