"""`replay --simulate` of a hash-id trace file streams it, and reports what reading the whole
trace first reports."""

from __future__ import annotations

import gc
import random
from dataclasses import replace
from unittest.mock import patch

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pcache.replayer.run import replay_options, run_replay
from pcache.replayer.simulate import stream
from pcache.replayer.simulate.driver import SimulationOptions
from pcache.traces.readers import read_trace
from pcache.traces.record import TraceRecord
from pcache.traces.synth import SynthOptions, iter_lines


def write(path, lines) -> None:
    path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))


def whole(path, **given) -> dict:
    """The report of the trace read whole, then replayed (what streaming must equal)."""
    with patch("pcache.replayer.run.streams", lambda *arguments: False):
        return streamed(path, **given)


def streamed(path, **given) -> dict:
    result = run_replay(str(path), replay_options("simulate", **given))
    return {"skipped": result.skipped, "reordered": result.reordered, **result.reports[0].to_dict()}


chat = SynthOptions(workload="chat", num_requests=600, output="hash-ids", turns=5, system_len=64)


@pytest.mark.parametrize(
    "given",
    [{}, {"cache_blocks": 300}, {"cache_blocks": 10**9}, {"limit": 250}, {"cache_gb": 0.5}],
)
def test_streaming_equals_reading_whole(tmp_path, given):
    path = tmp_path / "chat.jsonl"
    write(path, iter_lines(chat))
    assert streamed(path, **given) == whole(path, **given)


def test_a_trace_out_of_order_is_read_whole(tmp_path):
    lines = list(iter_lines(chat))
    lines[3], lines[4] = lines[4], lines[3]
    lines.insert(7, {"hash_ids": [1.5], "input_length": 4})
    path = tmp_path / "shuffled.jsonl"
    write(path, lines)
    path.write_bytes(path.read_bytes() + b"{not json\n")
    assert stream.simulate_file(str(path), lambda size: SimulationOptions()) is None
    got = streamed(path, cache_blocks=400)
    assert got == whole(path, cache_blocks=400)
    assert got["reordered"] and len(got["skipped"]) == 2


@settings(max_examples=40, deadline=None)
@given(
    requests=st.lists(
        st.tuples(st.lists(st.integers(0, 40), max_size=10), st.integers(0, 3)), max_size=60
    ),
    capacity=st.sampled_from([None, 12, 40, 5000]),
    block_sizes=st.sampled_from([(None,), (16,), (16, 8), (None, 32)]),
    bad=st.integers(0, 3),
    scale=st.sampled_from([1, 1, 2**35, -1]),
)
def test_any_trace_streams_to_the_same_report(
    tmp_path_factory, requests, capacity, block_sizes, bad, scale
):
    rng = random.Random(len(requests))
    lines: list = []
    clock = 0
    for number, (ids, step) in enumerate(requests):
        clock += step
        if number >= len(requests) // 2:  # later ids may be large or negative: a set holds them
            ids = [value * scale for value in ids]
        line = {"timestamp": clock, "input_length": len(ids) * 16, "hash_ids": ids}
        size = block_sizes[number % len(block_sizes)]
        if size is not None:
            line["block_size"] = size
        lines.append(line)
    for _ in range(bad):
        lines.insert(rng.randrange(len(lines) + 1), {"hash_ids": "x", "input_length": 1})
    path = tmp_path_factory.mktemp("trace") / "trace.jsonl"
    write(path, lines)
    given = {"cache_blocks": capacity}
    try:
        expected = whole(path, **given)
    except Exception as failure:  # the whole read refuses it: so does the stream
        with pytest.raises(type(failure)):
            streamed(path, **given)
        return
    assert streamed(path, **given) == expected


def test_records_are_let_go_as_they_are_served(tmp_path, monkeypatch):
    """Memory does not follow the number of requests: no more than a batch of records is
    alive at any time."""
    path = tmp_path / "chat.jsonl"
    write(path, iter_lines(replace(chat, num_requests=3000)))
    alive = []
    original = stream._batches

    def batches(records, limit):
        for batch in original(records, limit):
            gc.collect()
            alive.append(sum(1 for item in gc.get_objects() if type(item) is TraceRecord))
            yield batch

    monkeypatch.setattr(stream, "_batches", batches)
    monkeypatch.setattr(stream, "BATCH", 100)
    result = run_replay(str(path), replay_options("simulate", cache_blocks=500))
    report = result.reports[0]
    assert report.requests == 3000 and report.miss_reasons["evicted"] > 0
    assert len(alive) == 30 and max(alive) <= 2 * 100


def test_request_logs_are_read_whole(tmp_path):
    path = tmp_path / "requests.jsonl"
    write(path, [{"token_ids": [1, 2, 3, 4]}, {"token_ids": [1, 2, 3, 5]}])
    assert stream.simulate_file(str(path), lambda size: SimulationOptions()) is None
    report = run_replay(str(path), replay_options("simulate", block_size=2)).reports[0]
    assert report.requests == 2 and report.hit_tokens == 2
    assert read_trace(str(path)).format == "requests"
