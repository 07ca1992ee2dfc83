"""The server's steps as the client's clock shows them: chunk bursts are step ends, a request
is scheduled at the burst before its first chunk (or when sent, to an idle engine) and freed
at the burst of its last chunk."""

from __future__ import annotations

from itertools import pairwise

from hypothesis import given, settings
from hypothesis import strategies as st

from pcache.replayer.endpoint.client import RequestTiming
from pcache.replayer.endpoint.timeline import scheduled, step_ends


def timing(index: int, sent_ms: float, first_ms: float, gaps_ms=(), ok: bool = True):
    """A request sent at `sent_ms` whose chunks came at `first_ms` then after each gap."""
    first = (first_ms - sent_ms) / 1000
    latency = first + sum(gaps_ms) / 1000
    return RequestTiming(
        index,
        start_s=sent_ms / 1000,
        ok=ok,
        ttft_s=first,
        first_chunk_s=first,
        latency_s=latency,
        itl_s=[gap / 1000 for gap in gaps_ms],
        completion_tokens=len(gaps_ms) + 1,
    )


def test_requests_sent_during_a_step_are_scheduled_at_its_end():
    placed = scheduled(
        [
            timing(0, 0.0, 50.0),  # alone on an idle engine
            timing(1, 10.0, 80.0),  # sent during the first step: scheduled at its end
            timing(2, 12.0, 80.5),  # the same burst
            timing(3, 85.0, 120.0, gaps_ms=(10.0, 10.0)),  # idle again; decodes two steps
            timing(4, 90.0, 0.0, ok=False),  # failed: not placed
        ]
    )
    steps = {index: tuple(round(t, 6) for t in times) for index, times in placed.items()}
    assert steps == {
        0: (0.0, 50.0, 50.0),
        1: (50.0, 80.0, 80.0),
        2: (50.0, 80.0, 80.0),
        3: (85.0, 120.0, 140.0),
    }


@given(st.lists(st.floats(0, 10_000, allow_nan=False), min_size=1, max_size=50))
@settings(max_examples=100, deadline=None)
def test_every_chunk_falls_in_a_burst_no_later_than_it(times):
    ends = step_ends(times)
    assert ends == sorted(ends) and ends[0] == min(times)
    assert all(later - earlier > 3.0 for earlier, later in pairwise(ends))
    assert all(any(0 <= time - end <= 3.0 * len(times) for end in ends) for time in times)


@given(
    st.lists(
        st.tuples(st.integers(0, 1_000), st.integers(1, 500), st.integers(0, 5)),
        min_size=1,
        max_size=20,
    )
)
@settings(max_examples=100, deadline=None)
def test_a_request_is_admitted_after_it_was_sent_and_before_its_first_token(requests):
    timings = [
        timing(index, sent, sent + wait, gaps_ms=[7.0] * tokens)
        for index, (sent, wait, tokens) in enumerate(requests)
    ]
    for index, (admitted, first, freed) in scheduled(timings).items():
        sent = requests[index][0]
        assert sent - 1e-6 <= admitted <= first + 1e-6 and first <= freed + 1e-6
