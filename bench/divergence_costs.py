"""Per planted cause: what lint charges it, and what replaying the corrected log saves.

    python bench/divergence_costs.py              # seeds 1-5, every cause
    python bench/divergence_costs.py --seeds 10

The logs are tests/rules/test_divergence_costs.py's: several sessions of several users, one
cause planted in the part every request shares; the corrected log repeats the first request's
value everywhere. For each: requests, sessions, the tokens lint charges the cause's rule, the
re-prefilled tokens `replay --simulate` saves on the corrected log, and whether lint's "if
fixed" equals that replay. Nothing is timed.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> None:
    from pcache.pipeline import Settings
    from pcache.replayer.simulate.driver import SimulationOptions, simulate
    from pcache.rules.runner import LintOptions, lint_paths
    from pcache.traces.readers import read_trace
    from tests.rules.test_divergence_costs import CAUSES, TOKENIZER, generate

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    args = parser.parse_args()

    def replayed(path: Path) -> tuple[int, int]:
        trace = read_trace(path, settings=Settings(tokenizer=TOKENIZER))
        result = simulate(trace, SimulationOptions(policy="vllm", block_size=16))
        return result.query_tokens, result.hit_tokens

    print(f"tokenizer {TOKENIZER}, vllm profile, block size 16, unlimited serial cache")
    columns = ["cause".ljust(17), "rule ", " seed", "requests", "sessions", "charged"]
    print("  ".join([*columns, "replay saves", "if fixed = replay"]))
    with tempfile.TemporaryDirectory() as folder:
        for cause, rule in sorted(CAUSES.items()):
            for seed in range(1, args.seeds + 1):
                planted, corrected, _ = generate(cause, seed)
                paths = []
                for name, log in (("planted", planted), ("corrected", corrected)):
                    path = Path(folder) / f"{name}.jsonl"
                    path.write_text("".join(json.dumps(body) + "\n" for body in log))
                    paths.append(path)
                report = lint_paths(
                    [str(paths[0])], LintOptions(settings=Settings(tokenizer=TOKENIZER))
                )
                charged = sum(d.tokens_reprefilled for d in report.diagnostics if d.code == rule)
                others = sum(d.tokens_reprefilled for d in report.diagnostics if d.code != rule)
                (planted_tokens, planted_hits), (fixed_tokens, fixed_hits) = map(replayed, paths)
                saves = (planted_tokens - planted_hits) - (fixed_tokens - fixed_hits)
                summary = report.summary
                same = (
                    summary.prompt_tokens_if_fixed == fixed_tokens
                    and summary.reusable_tokens_if_fixed == fixed_hits
                )
                extra = f" (+{others} to other rules)" if others else ""
                print(
                    f"{cause:<17} {rule}  {seed:>4}  {summary.requests:>8}  {summary.sessions:>8}"
                    f"  {charged:>7}  {saves:>12}  {'yes' if same else 'no'}{extra}"
                )


if __name__ == "__main__":
    main()
