"""The one-pass capacity sweep equals the block pool run once per capacity."""

from __future__ import annotations

from array import array
from dataclasses import replace

from hypothesis import example, given, settings
from hypothesis import strategies as st

from pcache.cache.stack_sweep import stack_pass, sweep_pool
from pcache.replayer.simulate.driver import SimulationOptions, simulate
from pcache.replayer.simulate.sweep import block_keys, capacity_sweep
from pcache.traces.record import Trace, TraceRecord

BLOCK = 4


def token_trace(prompts: list[tuple[list[int], str | None]]) -> Trace:
    trace = Trace(source="<memory>", format="requests", block_size=None)
    for index, (tokens, salt) in enumerate(prompts):
        trace.records.append(
            TraceRecord(
                index, index + 1, float(index), len(tokens), 3, list(tokens), None, None, salt
            )
        )
    return trace


def hash_trace(requests: list[list[int]], lengths: list[int]) -> Trace:
    trace = Trace(source="<memory>", format="mooncake", block_size=BLOCK)
    for index, (ids, length) in enumerate(zip(requests, lengths, strict=True)):
        trace.records.append(
            TraceRecord(index, index + 1, float(index), length, 0, None, array("q", ids))
        )
    return trace


def per_capacity(trace: Trace, options: SimulationOptions, capacities, keep_last: bool):
    return [
        simulate(
            trace,
            replace(options, cache_blocks=size),
            keep_requests=keep_last and size == capacities[-1],
        )
        for size in capacities
    ]


# prompts drawn from a few shared stems so that prefixes repeat, with lengths that are and
# are not multiples of the block size, identical repeats and salts
stems = st.lists(st.integers(0, 3), min_size=0, max_size=14)
prompt = st.tuples(
    st.integers(0, 2),  # which stem
    stems,  # a tail of its own
    st.integers(0, 12),  # how much of the stem
    st.sampled_from([None, None, None, "a"]),
)


def build_prompts(choices, bases):
    prompts = []
    for which, tail, cut, salt in choices:
        base = bases[which % len(bases)]
        prompts.append((base[:cut] + tail, salt))
    return prompts


@settings(max_examples=150, deadline=None)
@given(
    bases=st.lists(st.lists(st.integers(0, 3), min_size=0, max_size=16), min_size=1, max_size=3),
    choices=st.lists(prompt, min_size=1, max_size=24),
    points=st.integers(2, 9),
)
@example(bases=[[1] * 8], choices=[(0, [], 8, None)] * 4 + [(0, [2] * 9, 0, None)], points=4)
def test_token_sweep_equals_the_pool(bases, choices, points):
    trace = token_trace(build_prompts(choices, bases))
    options = SimulationOptions(block_size=BLOCK)
    swept = capacity_sweep(trace, options, points, keep_requests=True)
    capacities = [report.capacity_blocks for report in swept.reports]
    expected = per_capacity(trace, options, capacities, True)
    for got, want in zip(swept.reports, expected, strict=True):
        assert got.to_dict() == want.to_dict()
        assert [o.to_dict() for o in got.per_request] == [o.to_dict() for o in want.per_request]
    unlimited = simulate(trace, options, keep_requests=True)
    assert swept.unlimited.to_dict() == unlimited.to_dict()
    assert [o.to_dict() for o in swept.unlimited.per_request] == [
        o.to_dict() for o in unlimited.per_request
    ]


@settings(max_examples=150, deadline=None)
@given(
    prompts=st.lists(
        st.tuples(st.lists(st.integers(0, 2), max_size=18), st.sampled_from([None, "s"])),
        min_size=1,
        max_size=20,
    ),
    extra=st.integers(0, 6),
)
def test_one_pass_is_exact_wherever_it_says_so(prompts, extra):
    """Every capacity from the largest request up: a capacity marked exact equals the pool."""
    trace = token_trace(prompts)
    keys, num_ids = block_keys(trace, BLOCK)
    lengths = [record.input_length for record in trace.records]
    low = max(max(-(-n // BLOCK) for n in lengths), 1)
    capacities = list(range(low, low + extra + 8))
    stack = stack_pass(zip(keys, lengths, strict=True), BLOCK, False, num_ids, sum(map(len, keys)))
    outcomes = sweep_pool(stack, capacities)
    options = SimulationOptions(block_size=BLOCK)
    for outcome in outcomes:
        if not outcome.exact:
            continue
        report = simulate(
            trace, replace(options, cache_blocks=outcome.capacity), keep_requests=True
        )
        assert [o.cached_tokens for o in report.per_request] == outcome.cached_tokens
        assert report.evicted_blocks == outcome.evicted_blocks
        assert report.peak_used_blocks == outcome.peak_used_blocks


@settings(max_examples=150, deadline=None)
@given(
    requests=st.lists(
        st.lists(st.integers(0, 12), min_size=0, max_size=8), min_size=1, max_size=24
    ),
    chained=st.booleans(),
    points=st.integers(2, 9),
    data=st.data(),
)
def test_hash_id_sweep_equals_the_pool(requests, chained, points, data):
    # an id twice in one request is not a trace of block hashes (the pool sized to an
    # unlimited cache's footprint refuses some of those)
    requests = [list(dict.fromkeys(ids)) for ids in requests]
    if chained:  # ids as a publisher writes them: a block's id names its whole prefix
        names: dict = {}
        requests = [
            [names.setdefault(tuple(ids[: i + 1]), len(names)) for i in range(len(ids))]
            for ids in requests
        ]
    lengths = [
        data.draw(st.integers(max(len(ids) - 1, 0) * BLOCK, len(ids) * BLOCK)) for ids in requests
    ]
    trace = hash_trace(requests, lengths)
    options = SimulationOptions()
    swept = capacity_sweep(trace, options, points, keep_requests=True)
    capacities = [report.capacity_blocks for report in swept.reports]
    expected = per_capacity(trace, options, capacities, True)
    for got, want in zip(swept.reports, expected, strict=True):
        assert got.to_dict() == want.to_dict()
        assert [o.to_dict() for o in got.per_request] == [o.to_dict() for o in want.per_request]
    assert swept.unlimited.to_dict() == simulate(trace, options).to_dict()


def test_a_prompt_cached_whole_is_recomputed_in_a_second_block():
    """The duplicate vLLM keeps (the last block of a fully cached prompt, recomputed) makes
    the one pass step aside once something is evicted: the pool decides that capacity."""
    stem = [1, 2, 3, 4, 5, 6, 7, 8]
    prompts = [(stem, None), (stem, None), ([9] * 8, None), ([*stem, 1], None), ([3] * 9, None)]
    trace = token_trace(prompts)
    keys, num_ids = block_keys(trace, BLOCK)
    lengths = [len(tokens) for tokens, _ in prompts]
    stack = stack_pass(zip(keys, lengths, strict=True), BLOCK, False, num_ids, sum(map(len, keys)))
    outcomes = sweep_pool(stack, [3, 4, 5, 6])
    assert not all(outcome.exact for outcome in outcomes)
    options = SimulationOptions(block_size=BLOCK)
    swept = capacity_sweep(trace, options, 4)
    expected = per_capacity(trace, options, [r.capacity_blocks for r in swept.reports], False)
    assert [r.to_dict() for r in swept.reports] == [r.to_dict() for r in expected]


@settings(max_examples=100, deadline=None)
@given(
    requests=st.lists(st.lists(st.integers(0, 6), max_size=8), min_size=1, max_size=16),
    points=st.integers(2, 6),
)
def test_hash_ids_repeated_within_a_request(requests, points):
    """Ids repeated in one request (not block hashes, but a file may say so): where the pool
    replays them, the sweep agrees."""
    from hypothesis import assume

    from pcache.errors import UsageError

    trace = hash_trace(requests, [len(ids) * BLOCK for ids in requests])
    options = SimulationOptions()
    try:
        swept = capacity_sweep(trace, options, points)
        capacities = [report.capacity_blocks for report in swept.reports]
        expected = per_capacity(trace, options, capacities, False)
    except UsageError:
        assume(False)
    assert [r.to_dict() for r in swept.reports] == [r.to_dict() for r in expected]


def interned_blocks(trace: Trace, block_size: int) -> list[list[int]]:
    """Every full block numbered by (its parent's number, its tokens), in order of appearance."""
    numbers: dict = {}
    keys = []
    for record in trace.records:
        tokens = record.token_ids
        parent: object = ("salt", record.cache_salt) if record.cache_salt else None
        ids = []
        for start in range(0, len(tokens) - block_size + 1, block_size):
            block = tuple(tokens[start : start + block_size])
            parent = numbers.setdefault((parent, block), len(numbers))
            ids.append(parent)
        keys.append(ids)
    return keys


@settings(max_examples=200, deadline=None)
@given(
    bases=st.lists(st.lists(st.integers(0, 2), min_size=0, max_size=30), min_size=1, max_size=3),
    choices=st.lists(prompt, min_size=1, max_size=24),
)
def test_block_keys_number_each_block_by_parent_and_tokens(bases, choices):
    """Runs of new blocks numbered in a row give every block the number interning it would."""
    trace = token_trace(build_prompts(choices, bases))
    keys, num_ids = block_keys(trace, BLOCK)
    expected = interned_blocks(trace, BLOCK)
    assert [list(ids) for ids in keys] == expected
    assert num_ids == len({key for ids in expected for key in ids})


@settings(max_examples=60, deadline=None)
@given(
    requests=st.lists(
        st.lists(st.integers(0, 9), max_size=8, unique=True), min_size=1, max_size=16
    ),
    points=st.integers(2, 6),
)
def test_hash_ids_of_any_magnitude_sweep_as_their_numbers(requests, points):
    """Ids far apart and negative (a trace's 64-bit hashes) sweep as the same ids 0, 1, ...."""
    spread = [
        [(number * 0x9E3779B97F4A7C15) % (1 << 63) - (1 << 62) for number in ids]
        for ids in requests
    ]
    lengths = [len(ids) * BLOCK for ids in requests]
    options = SimulationOptions()
    small = capacity_sweep(hash_trace(requests, lengths), options, points)
    large = capacity_sweep(hash_trace(spread, lengths), options, points)
    assert [r.to_dict() for r in small.reports] == [r.to_dict() for r in large.reports]
    assert small.unlimited.to_dict() == large.unlimited.to_dict()
