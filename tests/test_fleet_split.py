"""A serial fleet replay split into one routing pass and one task per replica
(`pcache.replayer.fleet.split`, what `--executor ray` runs) gives `simulate_fleet`'s report,
field for field, for every router; routers that read the pools stay in one pass."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pcache.executors.local import LocalExecutor
from pcache.replayer.fleet.driver import simulate_fleet
from pcache.replayer.fleet.routers import ROUTERS
from pcache.replayer.fleet.split import route_blind, simulate_fleet_split
from pcache.replayer.simulate.driver import SimulationOptions
from pcache.traces.readers import read_trace
from tests.conftest import SAMPLES
from tests.test_fleet import TRACES, traces

READS_POOLS = ("precise", "dynamo")


class CountingExecutor(LocalExecutor):
    """The in-process executor, counting the tasks it runs."""

    distributed = True

    def __init__(self):
        self.tasks = 0

    def map(self, function, items, *arguments):
        for result in super().map(function, items, *arguments):
            self.tasks += 1
            yield result


def both(trace, options, replicas, router):
    executor = CountingExecutor()
    split = simulate_fleet_split(trace, options, replicas, router, executor=executor)
    return split.to_dict(), simulate_fleet(trace, options, replicas, router).to_dict(), executor


@pytest.mark.parametrize("router", sorted(ROUTERS))
@pytest.mark.parametrize("policy", ["vllm", "radix"])
@pytest.mark.parametrize("cache_blocks", [None, 400])
def test_split_equals_one_pass_on_mooncake(router, policy, cache_blocks):
    trace = read_trace(str(TRACES[0]))
    options = SimulationOptions(policy=policy, cache_blocks=cache_blocks)
    split, one_pass, executor = both(trace, options, 4, router)
    assert split == one_pass
    assert executor.tasks == (0 if router in READS_POOLS else 4)


@pytest.mark.parametrize("router", ["round-robin", "sglang", "prefix-hash", "precise"])
def test_split_equals_one_pass_on_a_request_trace(router):
    trace = read_trace(str(SAMPLES / "traces" / "shared_prefix.jsonl"))
    split, one_pass, _ = both(trace, SimulationOptions(cache_blocks=400), 3, router)
    assert split == one_pass


def test_timed_replays_are_not_split():
    trace = read_trace(str(TRACES[1]))
    options = SimulationOptions(concurrency="timed", cache_blocks=400)
    split, one_pass, executor = both(trace, options, 2, "round-robin")
    assert split == one_pass and executor.tasks == 0


def test_routers_that_read_the_pools_are_detected():
    trace = read_trace(str(TRACES[0]))
    for router in sorted(ROUTERS):
        choices = route_blind(trace, 4, router, {}, 4, trace.block_size, None)
        assert (choices is None) == (router in READS_POOLS), router


def test_a_replica_too_small_fails_as_in_one_pass():
    trace = read_trace(str(TRACES[0]))
    options = SimulationOptions(cache_blocks=2)
    with pytest.raises(Exception) as one_pass:
        simulate_fleet(trace, options, 2, "round-robin")
    with pytest.raises(type(one_pass.value)) as split:
        simulate_fleet_split(trace, options, 2, "round-robin", executor=CountingExecutor())
    assert str(split.value) == str(one_pass.value)


@settings(max_examples=60, deadline=None)
@given(
    traces(),
    st.sampled_from(sorted(ROUTERS)),
    st.integers(1, 5),
    st.sampled_from([None, 6, 12]),
)
def test_split_equals_one_pass_property(trace, router, replicas, capacity):
    options = SimulationOptions(cache_blocks=capacity, block_size=trace.block_size)
    try:
        expected = simulate_fleet(trace, options, replicas, router).to_dict()
    except Exception as failure:  # a capacity too small: the split says the same
        with pytest.raises(type(failure)) as raised:
            simulate_fleet_split(trace, options, replicas, router, executor=CountingExecutor())
        assert str(raised.value) == str(failure)
        return
    split = simulate_fleet_split(trace, options, replicas, router, executor=CountingExecutor())
    assert split.to_dict() == expected
