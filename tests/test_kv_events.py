"""vLLM's KV event stream: `pcache serve --kv-events` publishes it, `replay --endpoint URL
--kv-events` receives it and checks it block by block against pcache's pool."""

from __future__ import annotations

import random
import socket
from pathlib import Path
from types import SimpleNamespace

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("zmq")
pytest.importorskip("msgpack")

from pcache.replayer.endpoint.kv_check import Replayed, check_kv_events
from pcache.serve.kv_event_wire import StoredBlocks, encode_batch, pool_events, wire_hash

FIXTURE = Path(__file__).parent / "fixtures" / "kv_events" / "vllm-0.32-batch.msgpack"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_a_batch_is_byte_for_byte_what_vllm_encodes():
    # the fixture was written by vLLM 0.32's own msgspec structs (KVEventBatch of BlockStored,
    # BlockStored, BlockRemoved, AllBlocksCleared)
    events = [
        StoredBlocks((2**64 - 1, 12345), None, tuple(range(32)), 16).encode(),
        StoredBlocks((7,), 12345, (300,) * 16, 16).encode(),
        {"type": "BlockRemoved", "block_hashes": [2**64 - 1], "medium": "GPU", "group_idx": 0},
        {"type": "AllBlocksCleared"},
    ]
    assert encode_batch(events, ts=1764600000.25) == FIXTURE.read_bytes()


def test_wire_hashes_are_the_low_64_bits_of_the_digest():
    digest = bytes(range(32))
    assert wire_hash(digest) == int.from_bytes(digest[-8:], "big")
    assert wire_hash(2**70 + 5) == 5


def test_pool_events_carry_parents_and_tokens():
    from pcache.cache.hashing import HashSettings
    from pcache.cache.kv_cache_manager import KVCacheManager
    from pcache.cache.request import CacheRequest

    manager = KVCacheManager(5, 4, enable_kv_cache_events=True)
    settings = HashSettings("sha256_cbor", 4)
    first = CacheRequest.from_tokens("a", list(range(8)), settings)
    manager.allocate_slots(first, 8)
    manager.free(first)
    second = CacheRequest.from_tokens("b", list(range(12)), settings)
    hits, num_hits = manager.get_computed_blocks(second)
    manager.allocate_slots(second, 12 - num_hits, num_hits, hits)
    events = pool_events(manager.block_pool.take_events(), 4)
    assert [event["type"] for event in events] == ["BlockStored", "BlockStored"]
    assert events[0]["parent_block_hash"] is None and events[0]["token_ids"] == list(range(8))
    assert events[1]["parent_block_hash"] == events[0]["block_hashes"][1]
    assert events[1]["token_ids"] == [8, 9, 10, 11]
    assert events[1]["block_hashes"] == [wire_hash(second.block_hashes[2])]


def served(prompts, block_size, num_blocks):
    """`prompts` served one at a time by pcache's own pool: the events it sends, and its
    replay as the check reads it (`Replayed`: the pool's own events and block keys)."""
    from pcache.cache.hashing import HashSettings
    from pcache.cache.kv_cache_manager import KVCacheManager
    from pcache.cache.request import CacheRequest

    manager = KVCacheManager(num_blocks, block_size, enable_kv_cache_events=True)
    settings = HashSettings("sha256_cbor", block_size)
    events, pool, keys = [], [], []
    for number, tokens in enumerate(prompts):
        request = CacheRequest.from_tokens(str(number), tokens, settings)
        hits, num_hits = manager.get_computed_blocks(request)
        manager.allocate_slots(request, len(tokens) - num_hits, num_hits, hits)
        manager.free(request)
        taken = manager.block_pool.take_events()
        events += pool_events(taken, block_size)
        pool += taken
        keys.append(request.block_hashes)
    return events, Replayed(pool, keys)


def synthetic(prompts, block_size, num_blocks):
    """The events pcache's own pool sends for `prompts` served one at a time."""
    return served(prompts, block_size, num_blocks)[0]


def received(events):
    return SimpleNamespace(events=events, batches=1, missed_batches=0, undecodable=0, stale=0)


@pytest.mark.parametrize("seed", range(3))
def test_the_check_matches_a_faithful_stream_and_catches_a_changed_one(seed):
    rng = random.Random(seed)
    system = [rng.randrange(100) for _ in range(40)]
    prompts = [
        system + [rng.randrange(100) for _ in range(rng.randrange(1, 60))] for _ in range(20)
    ]
    events, replayed = served(prompts, 8, 12)
    check = check_kv_events("x", received(events), prompts, 8, 12, "sha256_cbor", replayed)
    assert check.mismatches == 0 and check.removed_matched > 0
    assert check.hashes_compared > 0 and check.compared_by == "token blocks and sha256_cbor hashes"
    # a server with a larger cache evicts less than the replay: the check says so
    larger, _ = served(prompts, 8, 24)
    check = check_kv_events("x", received(larger), prompts, 8, 24, "sha256_cbor", replayed)
    assert check.removed_missing > 0
    # a dropped eviction and a changed token are both caught
    dropped = [event for event in events if event["type"] != "BlockRemoved"]
    check = check_kv_events("x", received(dropped), prompts, 8, 12, None, replayed)
    assert check.removed_missing > 0
    changed = [dict(event) for event in events]
    stored = next(event for event in changed if event["type"] == "BlockStored")
    stored["token_ids"] = [stored["token_ids"][0] + 1, *stored["token_ids"][1:]]
    assert check_kv_events("x", received(changed), prompts, 8, 12, None, replayed).mismatches > 0
    # another hash family's hashes differ
    check = check_kv_events("x", received(events), prompts, 8, 12, "sha256", replayed)
    assert check.hashes_differ > 0


def test_replay_checks_pcache_serves_events_block_by_block(tmp_path, cli):
    pytest.importorskip("torch")
    pytest.importorskip("uvicorn")
    from tests.serve_helpers import serve_process

    rng = random.Random(3)
    system = [rng.randrange(512) for _ in range(200)]
    lines = [
        {"token_ids": system + [rng.randrange(512) for _ in range(rng.randrange(20, 300))]}
        for _ in range(10)
    ]
    trace = tmp_path / "trace.jsonl"
    trace.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    events = f"tcp://127.0.0.1:{free_port()}"
    arguments = ("--model", "tiny", "--kv-cache-tokens", "1024", "--kv-events", events)
    with serve_process(*arguments) as url:
        common = (
            "replay", trace, "--endpoint", f"{url}/v1", "--kv-events", events,
            "--max-output-tokens", "1", "--max-concurrency", "1", "--reset-cache",
        )  # fmt: skip
        result = cli(*common, "--format", "json", "--replica-metrics", url)
        assert result.exit_code == 0, result.output
        data = orjson.loads(result.stdout)
        endpoint = data
        check = endpoint["kv_events"]
        assert check["mismatches"] == 0, check
        assert check["stored_matched"] > 0 and check["removed_matched"] > 0
        assert check["hashes_compared"] > 0 and check["hashes_differ"] == 0
        assert check["events_received"]["BlockStored"] >= 1
        assert check["num_blocks"] == 65 and check["missed_batches"] == 0
        (replica,) = endpoint["replicas"]
        assert replica["requests"] == len(lines) and replica["error"] is None
        assert replica["hit_tokens"] == sum(endpoint["cached_tokens"])
        text = cli(*common)
        assert text.exit_code == 0, text.output
        assert "KV events from tcp://127.0.0.1:" in text.stdout
        assert ", mismatches 0" in " ".join(text.stdout.split())


def test_bad_kv_events_endpoints_are_one_line_usage_errors(tmp_path, cli):
    trace = tmp_path / "trace.jsonl"
    trace.write_bytes(b'{"token_ids": [1, 2, 3]}\n')
    result = cli("replay", trace, "--endpoint", "http://127.0.0.1:9/v1", "--kv-events", "nope")
    assert result.exit_code == 2 and "--kv-events takes" in result.output
    result = cli(
        "replay", trace, "--endpoint", "http://127.0.0.1:9/v1", "--kv-events",
        "tcp://127.0.0.1:9", "--compare-cache",
    )  # fmt: skip
    assert result.exit_code == 2 and "--compare-cache" in result.output
    result = cli("serve", "--model", "tiny", "--kv-events", "http://x")
    assert result.exit_code == 2 and "--kv-events takes" in result.output


def test_request_counters_exist_from_the_start(tmp_path):
    pytest.importorskip("torch")
    httpx = pytest.importorskip("httpx")
    from pcache.replayer.endpoint.replicas import replica_counters
    from tests.serve_helpers import metric, served

    with served() as (url, _):
        text = httpx.get(f"{url}/metrics", timeout=10).text
    for reason in ("stop", "length", "abort", "error"):
        assert f'finished_reason="{reason}"' in text
    assert metric(text, "pcache:request_success_total", finished_reason="length") == 0
    assert replica_counters(text) == {"requests": 0.0, "prompt_tokens": 0.0, "hit_tokens": 0.0}


def test_the_subscriber_starts_once_connected_and_gets_the_first_batch():
    """`start` returns once the ZMQ handshake with the publisher (which binds, as vLLM's does)
    is done, not after a fixed sleep that a busy machine can outlast, so the batch published
    right after it arrives."""
    import zmq

    from pcache.replayer.endpoint.kv_events import KVEventSubscriber

    endpoint = f"tcp://127.0.0.1:{free_port()}"
    context = zmq.Context()
    publisher = context.socket(zmq.PUB)
    publisher.setsockopt(zmq.LINGER, 0)
    try:
        publisher.bind(endpoint)
        subscriber = KVEventSubscriber(endpoint)
        subscriber.start()
        assert subscriber.connected.is_set()
        publisher.send_multipart([b"kv-events", (7).to_bytes(8, "big"), FIXTURE.read_bytes()])
        received = subscriber.stop()
    finally:
        publisher.close()
        context.term()
    assert received.batches == 1 and received.events and received.last_sequence == 7


@given(
    st.lists(st.lists(st.integers(0, 3), min_size=0, max_size=40), min_size=1, max_size=12),
    st.sampled_from([1, 2, 4, 16]),
)
@settings(max_examples=60, deadline=None)
def test_a_pool_sized_to_the_trace_predicts_what_an_unlimited_one_does(prompts, block_size):
    """Without the server's block count, the prediction (and the KV check, which reads its
    pool's events) replays a pool that never fills for the trace: its events are those of a
    far larger pool."""
    from pcache.replayer.simulate.driver import SimulationOptions, Watched, simulate
    from pcache.traces.record import Trace, TraceRecord

    records = [
        TraceRecord(index, None, float(index), len(tokens), token_ids=list(tokens))
        for index, tokens in enumerate(prompts)
    ]
    replays = []
    for blocks in (None, 1 << 14):
        events: list[tuple] = []
        options = SimulationOptions(policy="vllm", cache_blocks=blocks, block_size=block_size)
        trace = Trace("t", "requests", None, list(records))
        simulate(trace, options, keep_requests=True, watched=Watched(events))
        replays.append(events)
    assert replays[0] == replays[1]
    assert not any(event[0] == "BlockRemoved" for event in replays[0])  # nothing evicted
