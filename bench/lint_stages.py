"""Where one lint's time goes: its stages, and the CPU time of lint and of its token child.

    python bench/lint_stages.py LOG                                  # gpt-oss, vLLM profile
    python bench/lint_stages.py agent.parquet -t o200k_base --profile openai
    /usr/bin/time -v python bench/lint_stages.py LOG                 # and the peak RSS

One pass of `pcache lint` as the command runs it (`_Run`, the default executor and jobs, the
collector paused), without writing the report, in this process with the pcache of this tree
(`PYTHONPATH`). Printed as one JSON object: `wall_s` (the pass, the tokenizer's load
included), `lint_cpu_s` (this process: reading, the rules, the costs, the fixed replay) and
`child_cpu_s` (the forked token stage, `pcache.rules.token_worker`: reading, rendering and
encoding again ahead of lint; 0 when lint did not fork), `stages_s` (lint's own wall seconds
per stage: `load` the tokenizer and rules, `read` parsing the input, `render` rendering and
encoding or waiting for the child's ids, `rules` the checks, `cost` the prefix index, defects
and totals, `fixed` the fixed log's replay when there is one), the requests, this process's
peak RSS and the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log")
    parser.add_argument("-t", "--tokenizer", default="gpt-oss")
    parser.add_argument("--profile", default="vllm")
    args = parser.parse_args()

    started = time.perf_counter()
    from pcache.pipeline import Settings
    from pcache.process.gc_pause import paused_gc
    from pcache.rules.config import LintConfig
    from pcache.rules.runner import LintOptions, _Run

    settings = Settings(tokenizer=args.tokenizer, profile=args.profile)
    run = _Run(LintOptions(settings=settings), LintConfig(), None)
    loaded = time.perf_counter()
    with paused_gc():
        run.lint_file(args.log)
        report = run.finish()
    done = time.perf_counter()
    own = resource.getrusage(resource.RUSAGE_SELF)
    child = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = {
        "wall_s": round(done - started, 2),
        "lint_cpu_s": round(own.ru_utime + own.ru_stime, 2),
        "child_cpu_s": round(child.ru_utime + child.ru_stime, 2),
        "stages_s": {"load": round(loaded - started, 3), **report.summary.stage_seconds},
        "requests": report.summary.requests,
        "peak_rss_mib": own.ru_maxrss // 1024,
        "load": [round(value, 2) for value in os.getloadavg()],
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
