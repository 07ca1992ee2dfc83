"""An adversarial sweep of `replay --endpoint`: N hostile answers of each kind drawn from
the strategies of tests/test_endpoint_hostile.py (a fixed seed), each replayed against a
loopback server, and the outcomes tallied. `python -m tests.endpoint_sweep [N]` (default
120 of each of the 5 kinds).

Each replay has three requests; the middle one gets the hostile answer. Reported: how that
request ended (failed, with the start of its reason; completed; completed with its usage
taken as unknown), whether the other two kept their measurements, any exception that
escaped (there must be none), and the slowest replay against the deadline.
"""

from __future__ import annotations

import collections
import sys
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, Phase, given, seed, settings

from tests.endpoint_fakes import fake_server
from tests.test_endpoint_hostile import (
    DEADLINE_S,
    GOOD_CACHED,
    HOSTILE,
    Script,
    hostile_kinds,
    replay,
    write_trace,
)


def outcome(data: dict) -> str:
    error = data["errors"][HOSTILE]
    if error.startswith("HTTP "):
        return "failed: an HTTP error status"
    if error:
        return "failed: " + error.split(" (")[0].split(": ")[0][:48]
    if HOSTILE in data["usage_problems"]:
        return "completed, its usage unknown (noted)"
    return "completed"


def sweep(count: int) -> tuple[collections.Counter, float]:
    tally: collections.Counter = collections.Counter()
    slowest = [0.0]
    script = Script()
    with fake_server(script) as url:
        trace = write_trace(Path(tempfile.mkdtemp()))
        for kind, strategy in hostile_kinds().items():
            _sweep_kind(kind, strategy, count, url, script, trace, tally, slowest)
    return tally, slowest[0]


def _sweep_kind(kind, strategy, count, url, script, trace, tally, slowest) -> None:
    @seed(2026)
    @settings(
        max_examples=count,
        deadline=None,
        phases=[Phase.generate],
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(reply=strategy)
    def run(reply) -> None:
        script.hostile = reply
        try:
            data, took = replay(url, trace)
        except Exception as error:  # counted: the sweep looks for these
            tally[f"EXCEPTION {type(error).__name__}: {error}"[:80]] += 1
            return
        slowest[0] = max(slowest[0], took)
        kept = all(
            data["errors"][i] == "" and data["cached_tokens"][i] == cached
            for i, cached in GOOD_CACHED.items()
        )
        tally[f"{kind}: {outcome(data)}"] += 1
        tally["the other requests kept their measurements" if kept else "OTHERS LOST"] += 1

    run()


if __name__ == "__main__":
    tally, slowest = sweep(int(sys.argv[1]) if len(sys.argv) > 1 else 120)
    for key, number in sorted(tally.items(), key=lambda item: (item[0].split(":")[0], -item[1])):
        print(f"{number:5d}  {key}")
    print(f"slowest replay {slowest:.2f} s (deadline {DEADLINE_S} s a request, 3 requests)")
