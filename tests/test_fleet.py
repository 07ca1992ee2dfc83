"""Fleets: one pool per replica behind a router (`replay --simulate --replicas N --router P`).

Each replica's pool sees exactly the requests routed to it, so a fleet replay must agree,
replica by replica, with the simulator's own single-pool replay of that sub-trace; the
`precise` router with unlimited caches must give the one-instance hit rate.
"""

from __future__ import annotations

import itertools
from dataclasses import replace
from pathlib import Path

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pcache.replayer.fleet.driver import simulate_fleet
from pcache.replayer.fleet.routers import make_router
from pcache.replayer.fleet.routers.request import FleetState, RoutedRequest, text_view
from pcache.replayer.fleet.routers.tenant_tree import TenantTree
from pcache.replayer.simulate.driver import SimulationOptions, simulate
from pcache.traces.readers import read_trace
from pcache.traces.record import Trace, TraceRecord
from tests.conftest import SAMPLES

MOONCAKE = Path(__file__).parent / "data" / "mooncake"
TRACES = [MOONCAKE / "conversation_head.jsonl", MOONCAKE / "synthetic_head.jsonl"]
BLOCK = 4


def chained_trace(paths: list[list[int]], cuts: list[int], gaps: list[int], outputs=None):
    """A hash-id trace whose ids are prefix-chained: an id stands for the whole path to it."""
    ids: dict[tuple, int] = {}
    records, now = [], 0.0
    for index, (path, cut, gap) in enumerate(zip(paths, cuts, gaps, strict=False)):
        chain = [ids.setdefault(tuple(path[: depth + 1]), len(ids)) for depth in range(len(path))]
        now += gap
        length = len(chain) * BLOCK - min(cut, BLOCK - 1)
        output = outputs[index] if outputs else 0
        records.append(TraceRecord(index, index + 1, now, length, output, None, chain))
    return Trace("<memory>", "mooncake", BLOCK, records)


paths = st.lists(st.lists(st.integers(0, 2), min_size=1, max_size=6), min_size=1, max_size=40)


@st.composite
def traces(draw):
    chosen = draw(paths)
    cuts = draw(st.lists(st.integers(0, BLOCK - 1), min_size=len(chosen), max_size=len(chosen)))
    gaps = draw(st.lists(st.integers(0, 50), min_size=len(chosen), max_size=len(chosen)))
    outputs = draw(st.lists(st.integers(0, 40), min_size=len(chosen), max_size=len(chosen)))
    return chained_trace(chosen, cuts, gaps, outputs)


def sub_trace(trace: Trace, replica: int, count: int) -> Trace:
    """The requests round-robin sends to `replica` of `count`, in order."""
    return replace(trace, records=trace.records[replica::count])


def assert_replicas_match(trace: Trace, options: SimulationOptions, count: int) -> None:
    fleet = simulate_fleet(trace, options, count, "round-robin").fleet
    assert fleet is not None
    for replica in fleet.replicas:
        part = sub_trace(trace, replica.replica, count)
        if not part.records:
            assert replica.requests == 0
            continue
        alone = simulate(part, options)
        got = (replica.requests, replica.prompt_tokens, replica.hit_tokens)
        assert got == (alone.requests, alone.query_tokens, alone.hit_tokens), replica
        assert replica.hit_requests == alone.hit_requests
        assert replica.evicted_blocks == alone.evicted_blocks
        assert replica.peak_used_blocks == alone.peak_used_blocks


@settings(max_examples=60, deadline=None)
@given(
    trace=traces(),
    count=st.integers(1, 5),
    capacity=st.one_of(st.none(), st.integers(6, 24)),
    policy=st.sampled_from(["vllm", "radix"]),
    concurrency=st.sampled_from(["serial", "timed"]),
)
def test_round_robin_replicas_are_single_pool_replays_of_their_requests(
    trace, count, capacity, policy, concurrency
):
    options = SimulationOptions(policy=policy, cache_blocks=capacity, concurrency=concurrency)
    assert_replicas_match(trace, options, count)


@pytest.mark.parametrize("path", TRACES, ids=lambda path: path.stem)
@pytest.mark.parametrize("capacity", [None, 400])
def test_round_robin_on_mooncake_samples_equals_per_replica_replays(path, capacity):
    trace = read_trace(path)
    for count in (2, 4, 8, 16):
        assert_replicas_match(trace, SimulationOptions(cache_blocks=capacity), count)


@settings(max_examples=60, deadline=None)
@given(
    trace=traces(),
    count=st.integers(1, 6),
    policy=st.sampled_from(["vllm", "radix"]),
    router=st.sampled_from(["precise", "dynamo"]),
)
def test_precise_with_unlimited_caches_keeps_the_one_instance_hit_rate(
    trace, count, policy, router
):
    """`dynamo` too: serial, nothing is in flight, so its cost is the prefill alone."""
    options = SimulationOptions(policy=policy)
    one = simulate(trace, options)
    fleet = simulate_fleet(trace, options, count, router)
    assert fleet.hit_tokens == one.hit_tokens
    assert fleet.fleet.misrouted_requests == 0


@pytest.mark.parametrize("salt", [None, "tenant-a"])
@pytest.mark.parametrize("policy", ["vllm", "radix"])
def test_precise_keeps_the_one_instance_hit_rate_on_rendered_requests(policy, salt):
    from pcache.pipeline import Settings

    path = SAMPLES / "traces" / "requests_tiny.jsonl"
    trace = read_trace(path, settings=Settings(cache_salt=salt))
    assert trace.records[0].token_ids and trace.records[0].routing_text
    options = SimulationOptions(policy=policy)
    fleet = simulate_fleet(trace, options, 3, "precise")
    assert fleet.hit_tokens == simulate(trace, options).hit_tokens > 0
    assert_replicas_match(trace, options, 3)  # token records, salted or not


@settings(max_examples=30, deadline=None)
@given(trace=traces(), count=st.integers(2, 6), seed=st.integers(0, 2**32))
def test_random_with_a_seed_routes_the_same_way_every_time(trace, count, seed):
    options = SimulationOptions()
    runs = [simulate_fleet(trace, options, count, "random", {"seed": seed}).fleet for _ in range(2)]
    assert runs[0].to_dict() == runs[1].to_dict()


def test_random_seeds_differ():
    trace = chained_trace([[n % 3, n % 5] for n in range(200)], [0] * 200, [1] * 200)
    splits = {
        tuple(
            r.requests
            for r in simulate_fleet(
                trace, SimulationOptions(), 4, "random", {"seed": seed}
            ).fleet.replicas
        )
        for seed in range(3)
    }
    assert len(splits) > 1


def routed(router, records, block_size=BLOCK, count=2):
    """Replica indices `router` chooses for `records` in a serial replay (no load)."""
    state = FleetState.empty(count)
    chosen = []
    for record in records:
        units, chars, total = text_view(record, block_size, 4)
        request = RoutedRequest(record, units, chars, total, [0] * count, record.timestamp_ms)
        chosen.append(router.route(request, state))
    return chosen


def test_sglang_code_fallback_sends_unmatched_requests_to_the_first_worker():
    trace = chained_trace([[0, 1], [1, 1], [2, 0], [0, 1, 2]], [0] * 4, [1] * 4)
    code = routed(make_router("sglang", 2), trace.records)
    assert code == [0, 0, 0, 0]  # below the threshold: least load, ties to the first
    documented = routed(make_router("sglang", 2, {"fallback": "smallest-tree"}), trace.records)
    assert documented == [0, 1, 0, 0]  # smallest tree, then the match ([0, 1] is on 0)


def test_sglang_follows_the_tree_above_the_threshold_and_reads_text():
    records = [
        TraceRecord(0, 1, 0.0, 10, routing_text="system prompt A; question 1"),
        TraceRecord(1, 2, 1.0, 10, routing_text="another system; question"),
        TraceRecord(2, 3, 2.0, 10, routing_text="another system; question 2"),
    ]
    assert routed(make_router("sglang", 2, {"fallback": "smallest-tree"}), records, None) == [
        0,
        1,
        1,
    ]


@settings(max_examples=100, deadline=None)
@given(
    texts=st.lists(st.text("abc", min_size=1, max_size=12), min_size=1, max_size=30),
    limit=st.integers(0, 30),
)
def test_tenant_tree_counts_and_eviction_keep_their_invariants(texts, limit):
    tree = TenantTree(3)
    for step, text in enumerate(texts):
        tree.insert(text, None, step % 3, float(step))
        tree.check_integrity()
    for tenant in range(3):
        tree.evict(tenant, limit)
        tree.check_integrity()
        assert tree.tenant_chars[tenant] <= limit


def walked_evict(tree: TenantTree, tenant: int, max_chars: int) -> None:
    """SGLang's eviction as `tree.rs` runs it: walk the tree for the tenant's leaves, then
    drop the least recently used until the tenant is within `max_chars`."""
    heap = []
    stack = [tree.root]
    while stack:
        node = stack.pop()
        held = [child for child in node.children.values() if tenant in child.tenants]
        stack.extend(held)
        if not held and node is not tree.root:
            heap.append((node.tenants[tenant], node))
    heap.sort(key=lambda entry: entry[0])
    while heap and tree.tenant_chars[tenant] > max_chars:
        _, node = heap.pop(0)
        del node.tenants[tenant]
        tree.tenant_chars[tenant] -= node.chars
        parent = node.parent
        if not node.tenants and not node.children:
            del parent.children[node.key[0]]
        if parent is not tree.root and not any(
            tenant in child.tenants for child in parent.children.values()
        ):
            heap.append((parent.tenants[tenant], parent))
            heap.sort(key=lambda entry: entry[0])
    tree.leaves[tenant] = {node for node in tree.leaves[tenant] if tenant in node.tenants}


def tree_contents(tree: TenantTree) -> list:
    """Every node as (its path from the root, its tenants and their times), sorted."""
    found, stack = [], [((), tree.root)]
    while stack:
        path, node = stack.pop()
        found.append((path, sorted(node.tenants.items())))
        stack.extend((path + tuple(child.key), child) for child in node.children.values())
    return sorted(found)


@settings(max_examples=100, deadline=None)
@given(
    texts=st.lists(st.text("abc", min_size=1, max_size=12), min_size=1, max_size=30),
    limits=st.lists(st.integers(0, 30), min_size=3, max_size=3),
)
def test_eviction_from_the_kept_leaves_drops_what_walking_the_tree_drops(texts, limits):
    trees = TenantTree(3), TenantTree(3)
    for step, text in enumerate(texts):  # one time per insert: no two leaves share one
        for tree in trees:
            tree.insert(text, None, step % 3, float(step))
    for tenant, limit in enumerate(limits):
        trees[0].evict(tenant, limit)
        walked_evict(trees[1], tenant, limit)
        assert trees[0].tenant_chars == trees[1].tenant_chars
        assert tree_contents(trees[0]) == tree_contents(trees[1])
    trees[0].check_integrity()


def test_least_load_spreads_only_when_requests_overlap():
    trace = chained_trace([[n] for n in range(12)], [0] * 12, [0] * 12, [400] * 12)
    serial = simulate_fleet(trace, SimulationOptions(), 3, "least-load").fleet
    assert [r.requests for r in serial.replicas] == [12, 0, 0]
    timed = simulate_fleet(trace, SimulationOptions(concurrency="timed"), 3, "least-load").fleet
    assert [r.requests for r in timed.replicas] == [4, 4, 4]


def test_dynamo_weighs_decode_blocks_in_flight_against_prefill():
    # the same 3-block prompt four times at once: cached on replica 0 after the first, but
    # the requests in flight there cost more than recomputing elsewhere
    trace = chained_trace([[0, 0, 0]] * 4, [0] * 4, [0] * 4, [1000] * 4)
    timed = SimulationOptions(concurrency="timed")
    fleet = simulate_fleet(trace, timed, 2, "dynamo").fleet
    assert [r.requests for r in fleet.replicas] == [2, 2]
    serial = simulate_fleet(trace, SimulationOptions(), 2, "dynamo").fleet
    assert sorted(r.requests for r in serial.replicas) == [0, 4]


def test_llm_d_blocks_name_their_prefix_and_drop_the_partial_tail():
    from pcache.replayer.fleet.routers.llm_d import block_keys

    record = TraceRecord(0, 1, 0.0, 10, routing_text="x" * 130)
    request = RoutedRequest(record, *text_view(record, None, 4), [0], 0.0)
    assert block_keys(request, 64, 256) == ["x" * 64, "x" * 128]
    assert len(block_keys(request, 64, 1)) == 1
    hashed = TraceRecord(1, 2, 0.0, 20, hash_ids=[7, 9])  # blocks of 16 tokens: 64 chars each
    request = RoutedRequest(hashed, *text_view(hashed, 16, 4), [0], 0.0)
    assert block_keys(request, 32, 256) == [(7, 32), (7, 64)]  # the second id: 16 chars only


def test_llm_d_follows_the_prefix_when_nothing_is_in_flight():
    trace = chained_trace([[n % 3] * 40 for n in range(12)], [0] * 12, [1] * 12)
    fleet = simulate_fleet(trace, SimulationOptions(), 3, "llm-d").fleet
    one = simulate(trace, SimulationOptions())
    assert fleet.misrouted_requests == 0
    assert sum(r.hit_tokens for r in fleet.replicas) == one.hit_tokens


def test_session_keeps_a_session_on_one_replica():
    trace = read_trace(SAMPLES / "traces" / "shared_prefix_hash_ids.jsonl")
    fleet = simulate_fleet(trace, SimulationOptions(), 4, "session")
    routes: dict[str, set[int]] = {}
    router = make_router("session", 4)
    for record, replica in zip(
        trace.records, routed(router, trace.records, trace.block_size, 4), strict=True
    ):
        routes.setdefault(record.session_id, set()).add(replica)
    assert all(len(replicas) == 1 for replicas in routes.values())
    assert sum(r.requests for r in fleet.fleet.replicas) == len(trace.records)


def test_router_precision_counts_the_tokens_round_robin_leaves_behind():
    trace = chained_trace([[0, 1], [0, 1], [0, 1]], [0] * 3, [1] * 3)
    fleet = simulate_fleet(trace, SimulationOptions(), 2, "round-robin").fleet.to_dict()
    precision = fleet["router_precision"]
    # request 2 goes to replica 1, which holds nothing; replica 0 holds both blocks
    assert precision["misrouted_requests"] == 1
    assert precision["misrouted_tokens"] == 2 * BLOCK
    assert fleet["load_imbalance"]["requests"] == pytest.approx(2 / 1.5)


# -- the command line -------------------------------------------------------------------------


def test_grid_json_has_one_entry_per_router_and_replica_count(cli):
    result = cli(
        "replay",
        str(SAMPLES / "traces" / "shared_prefix_hash_ids.jsonl"),
        "--replicas",
        "1,2,4",
        "--router",
        "round-robin,sglang,precise",
        "--format",
        "json",
    )
    assert result.exit_code == 0, result.output
    grid = orjson.loads(result.stdout)["sweep"]
    assert [(entry["router"], entry["num_replicas"]) for entry in grid] == list(
        itertools.product(["round-robin", "sglang", "precise"], [1, 2, 4])
    )
    for entry in grid:
        assert len(entry["replicas"]) == entry["num_replicas"]
        assert sum(r["hit_tokens"] for r in entry["replicas"]) == entry["hit_tokens"]
        assert set(entry["replicas"][0]) >= {
            "requests",
            "prompt_tokens",
            "hit_tokens",
            "evicted_blocks",
        }
    one = grid[0]["token_hit_rate"]
    assert all(e["token_hit_rate"] == one for e in grid if e["router"] == "precise")


def test_text_report_of_one_fleet(cli):
    result = cli(
        "replay",
        str(SAMPLES / "traces" / "mooncake_tiny.jsonl"),
        "--replicas",
        "2",
        "--router",
        "prefix-hash",
        "--router-param",
        "prefix-hash.prefix_chars=50",
        "--cache-blocks",
        "64",
    )
    assert result.exit_code == 0, result.output
    for words in ("router", "prefix-hash", "prefix_chars=50", "load imbalance", "misrouted"):
        assert words in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--router", "sglang"], "need --replicas"),
        (["--replicas", "0"], "--replicas"),
        (["--replicas", "2,x"], "--replicas"),
        (["--replicas", "2", "--router", "nginx"], "--router must be one of"),
        (["--replicas", "2", "--router-param", "sglang.cache_threshold=1"], "is not chosen"),
        (["--replicas", "2", "--router", "sglang", "--router-param", "sglang.nope=1"], "nope"),
        (
            ["--replicas", "2", "--router", "sglang", "--router-param", "sglang.fallback=x"],
            "fallback",
        ),
        (["--replicas", "2", "--policy", "openai"], "--policy vllm and radix"),
        (
            ["--replicas", "2", "--router", "session", "--router-param", "session.points=0"],
            "points",
        ),
        (
            ["--replicas", "2", "--router", "sglang", "--router-param", "sglang.balance_rel=nan"],
            "finite",
        ),
        (["--replicas", "2", "--router", "random", "--router-param", "random.seed=x"], "number"),
        (["--replicas", "2", "--chars-per-token", "0"], "--chars-per-token"),
        (["--replicas", "2", "--capacity-sweep"], "not both"),
    ],
)
def test_bad_fleet_options_fail_in_one_line(cli, args, message):
    result = cli("replay", str(SAMPLES / "traces" / "mooncake_tiny.jsonl"), *args)
    assert result.exit_code == 2, result.output
    assert message in result.stderr
    assert "Traceback" not in result.output
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_the_api_replays_a_fleet_as_the_command_does(cli):
    import pcache
    from pcache.replayer.fleet.options import FleetOptions

    trace = SAMPLES / "traces" / "shared_prefix_hash_ids.jsonl"
    fleet = FleetOptions(replicas=(2,), routers=("sglang",))
    result = pcache.replay(trace, fleet=fleet)
    command = cli("replay", str(trace), "--replicas", "2", "--router", "sglang", "-f", "json")
    assert command.exit_code == 0, command.output
    assert orjson.loads(command.stdout) == orjson.loads(orjson.dumps(result.to_dict()))


def test_replicas_belong_to_the_simulator(cli):
    trace = str(SAMPLES / "traces" / "mooncake_tiny.jsonl")
    result = cli("replay", trace, "--engine", "cpu", "--model", "tiny", "--replicas", "2")
    assert result.exit_code == 2, result.output
    assert "--replicas applies to --simulate" in result.stderr
