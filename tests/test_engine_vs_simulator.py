"""The simulator and the engine drive the same block pool: the same cached tokens, always."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from pcache.engine.config import EngineConfig  # noqa: E402
from pcache.engine.engine import Engine  # noqa: E402
from pcache.replayer.simulate.driver import SimulationOptions, simulate  # noqa: E402
from pcache.traces.record import Trace, TraceRecord  # noqa: E402


def workload(groups: list[tuple[int, int, int]], seed: int) -> list[list[int]]:
    """Prompts of (prefix id, shared length, own length): same prefix id = same shared tokens."""
    prompts = []
    for index, (prefix, shared, own) in enumerate(groups):
        head = torch.randint(0, 512, (shared,), generator=torch.Generator().manual_seed(prefix))
        tail = torch.randint(0, 512, (own,), generator=torch.Generator().manual_seed(seed + index))
        prompts.append(head.tolist() + tail.tolist())
    return prompts


def simulated_cached_tokens(prompts, cache_blocks: int | None) -> list[int]:
    records = [
        TraceRecord(index=i, line=None, timestamp_ms=float(i), input_length=len(p), token_ids=p)
        for i, p in enumerate(prompts)
    ]
    trace = Trace(source="workload", format="pcache", block_size=None, records=records)
    options = SimulationOptions(cache_blocks=cache_blocks, block_size=16, concurrency="serial")
    report = simulate(trace, options, keep_requests=True)
    return [outcome.cached_tokens for outcome in report.per_request]


def engine_cached_tokens(prompts, cache_blocks: int) -> list[int]:
    engine = Engine(EngineConfig(model="tiny", num_kv_blocks=cache_blocks + 1))
    cached = []
    for prompt in prompts:  # one request at a time, as the serial simulation
        request_id = engine.add_request(prompt, 1)
        engine.run_until_done()
        cached.append(engine.sequences[request_id].num_cached_tokens)
        engine.check_integrity()
    return cached


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    groups=st.lists(
        st.tuples(st.integers(0, 2), st.integers(0, 70), st.integers(1, 30)),
        min_size=2,
        max_size=10,
    ),
    cache_blocks=st.integers(7, 40),
)
def test_engine_and_simulator_agree_on_cached_tokens(groups, cache_blocks):
    prompts = workload(groups, seed=1000)
    assert engine_cached_tokens(prompts, cache_blocks) == simulated_cached_tokens(
        prompts, cache_blocks
    )


def test_agreement_with_eviction():
    groups = [(0, 64, 5), (1, 64, 5), (0, 64, 9), (2, 48, 20), (1, 64, 1), (0, 64, 3)]
    prompts = workload(groups, seed=5)
    simulated = simulated_cached_tokens(prompts, 9)
    assert engine_cached_tokens(prompts, 9) == simulated
    assert simulated != simulated_cached_tokens(prompts, None)  # the small pool did evict
