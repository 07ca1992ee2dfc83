"""The `ray` router (Ray Serve LLM's PrefixCacheAffinityRouter) on small traces computed by
hand, its eviction, its parameters on the command line, and its tree's invariants."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pcache.replayer.fleet.routers import make_router
from pcache.replayer.fleet.routers.request import FleetState, RoutedRequest, text_view
from pcache.replayer.fleet.routers.tenant_tree import TenantTree
from pcache.traces.record import TraceRecord
from tests.conftest import SAMPLES

# (text, ms): the walk and the tree's character counts, request by request, with the defaults
# (match_rate_threshold 0.1):
#   "aaaa aaaa"   empty tree: rate 0, smallest = both (0, 0), the first        -> 0   [9, 0]
#   "zzzz"        rate 0, smallest = 1 (0 < 9)                                -> 1   [9, 4]
#   "aaaa bbbb"   "aaaa " 5/9 = 0.56, the node reached ("aaaa aaaa") is on 0  -> 0   [13, 4]
#   "zzzzzzzz"    "zzzz" 4/8 = 0.5, on 1                                      -> 1   [13, 8]
#   "q"           rate 0, smallest = 1 (8 < 13)                               -> 1   [13, 9]
#   "aqqqqqqqqqq" "a" 1/11 = 0.09 < 0.1: smallest = 1 (9 < 13)                -> 1   [13, 20]
# With match_rate_threshold 0.05 the last one follows "a" to the node "aaaa " on 0.
TEXTS = ["aaaa aaaa", "zzzz", "aaaa bbbb", "zzzzzzzz", "q", "aqqqqqqqqqq"]


def records(texts, times=None):
    times = times or range(len(texts))
    return [
        TraceRecord(index, index + 1, float(ms), 10, routing_text=text)
        for index, (text, ms) in enumerate(zip(texts, times, strict=True))
    ]


def request_of(record: TraceRecord, count: int) -> RoutedRequest:
    units, chars, total = text_view(record, None, 4)
    return RoutedRequest(record, units, chars, total, [0] * count, record.timestamp_ms)


def routed(router, trace, count=2, in_flight=None):
    """Replica indices `router` chooses, every replica holding `in_flight` requests."""
    state = FleetState.empty(count)
    if in_flight is not None:
        state.in_flight[:] = in_flight
    return [router.route(request_of(record, count), state) for record in trace]


def test_ray_follows_the_deepest_node_above_the_match_rate_and_the_smallest_below():
    router = make_router("ray", 2)
    assert routed(router, records(TEXTS)) == [0, 1, 0, 1, 1, 1]
    assert router.tree.tenant_chars == [13, 20]
    lower = make_router("ray", 2, {"match_rate_threshold": 0.05})
    assert routed(lower, records(TEXTS)) == [0, 1, 0, 1, 1, 0]


def test_ray_spreads_unmatched_prefixes_where_sglangs_code_does_not():
    """Below its threshold sglang-router 0.3.x takes the least-loaded worker (ties to the
    first); Ray takes the replica with the fewest characters."""
    texts = ["first system prompt", "second, unrelated", "third one, again new"]
    assert routed(make_router("ray", 3), records(texts), 3) == [0, 1, 2]
    assert routed(make_router("sglang", 3), records(texts), 3) == [0, 0, 0]


def test_ray_picks_the_lowest_queue_among_its_candidates():
    # queues [3, 1] throughout. "x": both are the smallest (0, 0), the shorter queue -> 1;
    # "y": 0 alone is the smallest (0 < 1) -> 0, load aside; "new": both again (1, 1) -> 1
    assert routed(make_router("ray", 2), records(["x", "y", "new"]), in_flight=[3, 1]) == [1, 0, 1]
    # "x" is on 0 only: the deepest node's one candidate, however loaded
    router = make_router("ray", 2)
    state = FleetState.empty(2)
    first, second = records(["x", "x"])
    assert router.route(request_of(first, 2), state) == 0
    state.in_flight[:] = [5, 0]
    assert router.route(request_of(second, 2), state) == 0


def test_ray_imbalance_falls_back_to_two_choices():
    trace = records(["abc", "abc", "abc"])
    # the code's default (infinity: None) never finds the load imbalanced: "abc" stays on 0
    state = FleetState.empty(2)
    router = make_router("ray", 2)
    assert router.route(request_of(trace[0], 2), state) == 0
    state.in_flight[:] = [20, 0]
    assert router.route(request_of(trace[1], 2), state) == 0
    # the documented 10: a spread of 20 is imbalanced, two choices take the shorter queue
    documented = make_router("ray", 2, {"imbalanced_threshold": 10})
    state = FleetState.empty(2)
    assert documented.route(request_of(trace[0], 2), state) == 0
    state.in_flight[:] = [20, 0]
    assert documented.route(request_of(trace[1], 2), state) == 1
    state.in_flight[:] = [5, 0]  # a spread of 5: the tree again, now "abc" is on both
    assert documented.route(request_of(trace[2], 2), state) == 1
    assert make_router("ray", 2, {"imbalanced_threshold": None}).parameters == router.parameters


def test_two_choices_draw_distinct_replicas_from_the_seed():
    picks = {tuple(make_router("ray", 5, {"seed": seed})._two_choices()) for seed in range(20)}
    assert all(first != second for first, second in picks)
    assert len(picks) > 1
    same = [make_router("ray", 5, {"seed": 3})._two_choices() for _ in range(2)]
    assert same[0] == same[1]


def test_ray_eviction_drops_whole_inserts_oldest_first():
    """Threshold 10, target 6, every second. Inserts (logical stamps 1-4):
    "abcdefgh" -> 0; "xyz" -> 1; "abcdefgh12" -> 0 (stamp 3 on "abcdefgh" and "12");
    "abQ" -> 0 splits "ab" (stamp 4) / "cdefgh" (3) and adds "Q" (4): 0 holds 11 characters.
    At 1,000 ms 0 holds more than 10: at least 11 - 6 = 5 must go, the oldest stamp (3) goes
    whole ("cdefgh" and "12", 8 characters), leaving "ab" and "Q"."""
    texts = ["abcdefgh", "xyz", "abcdefgh12", "abQ", "xyzw"]
    parameters = {
        "do_eviction": True,
        "eviction_threshold_chars": 10,
        "eviction_target_chars": 6,
        "eviction_interval_secs": 1,
    }
    router = make_router("ray", 2, parameters)
    assert routed(router, records(texts, [0, 500, 600, 700, 1000])) == [0, 1, 0, 0, 1]
    assert router.tree.tenant_chars == [3, 4]
    assert router.tree.prefix_match("abcdefgh", None)[0] == 2
    router.tree.check_integrity()
    kept = make_router("ray", 2, {**parameters, "do_eviction": False})
    routed(kept, records(texts, [0, 500, 600, 700, 1000]))
    assert kept.tree.tenant_chars == [11, 4]


@settings(max_examples=100, deadline=None)
@given(
    texts=st.lists(st.text("abc", min_size=1, max_size=12), min_size=1, max_size=30),
    goal=st.integers(0, 40),
)
def test_evicting_the_oldest_keeps_the_trees_invariants(texts, goal):
    tree = TenantTree(3)
    for step, text in enumerate(texts):
        tree.insert(text, None, step % 3, float(step))
    for tenant in range(3):
        before = tree.tenant_chars[tenant]
        removed = tree.evict_oldest(tenant, goal)
        tree.check_integrity()
        assert tree.tenant_chars[tenant] == before - removed
        assert removed >= min(goal, before)


def test_ray_replays_a_fleet_from_the_command_line(cli):
    trace = str(SAMPLES / "traces" / "shared_prefix.jsonl")
    result = cli(
        "replay", trace, "--replicas", "2", "--router", "ray", "--format", "json",
        "--router-param", "ray.imbalanced_threshold=10", "--router-param", "ray.do_eviction=yes",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    data = orjson.loads(result.stdout)
    assert data["router"] == "ray"
    parameters = data["router_parameters"]
    assert parameters["imbalanced_threshold"] == 10 and parameters["do_eviction"] is True
    assert parameters["match_rate_threshold"] == 0.1
    assert sum(row["requests"] for row in data["replicas"]) == data["requests"]


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("ray.do_eviction=maybe", "true or false"),
        ("ray.match_rate_threshold=2", "between 0 and 1"),
        ("ray.imbalanced_threshold=-inf", "finite"),
        ("ray.imbalanced_threshold=ten", "number"),
        ("ray.eviction_target_chars=500000", "eviction_target_chars"),
    ],
)
def test_bad_ray_parameters_fail_in_one_line(cli, setting, message):
    trace = str(SAMPLES / "traces" / "mooncake_tiny.jsonl")
    result = cli("replay", trace, "--replicas", "2", "--router", "ray", "--router-param", setting)
    assert result.exit_code == 2, result.output
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


@pytest.mark.parametrize("concurrency", ["serial", "timed"])
@pytest.mark.parametrize("trace_name", ["mooncake_tiny.jsonl", "shared_prefix.jsonl"])
def test_every_router_replays_both_modes_with_its_defaults(cli, trace_name, concurrency):
    from dataclasses import asdict

    from pcache.replayer.fleet.routers import ROUTERS, build_parameters

    result = cli(
        "replay", str(SAMPLES / "traces" / trace_name), "--replicas", "3",
        "--router", ",".join(ROUTERS), "--concurrency", concurrency, "--format", "json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    sweep = orjson.loads(result.stdout)["sweep"]
    assert [entry["router"] for entry in sweep] == list(ROUTERS)
    for entry in sweep:
        defaults = orjson.loads(orjson.dumps(asdict(build_parameters(entry["router"]))))
        assert entry["router_parameters"] == defaults
        assert sum(row["requests"] for row in entry["replicas"]) == entry["requests"]
