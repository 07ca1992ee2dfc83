"""`trace synth` generates as it writes: the same lines as generating every request first.

The reference below is the list-based synthesis (every request built, then sorted by arrival,
one id table for all blocks); the streamed output must match it line for line.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from pcache.traces.synth import SynthOptions, SynthRequest, _gaps, iter_lines


def reference_requests(options: SynthOptions) -> list[SynthRequest]:
    rng = np.random.default_rng(options.seed)
    if options.workload == "shared-prefix":
        arrivals = np.cumsum(_gaps(rng, options, options.num_requests))
        if options.zipf_alpha is not None:
            weights = 1.0 / np.arange(1, options.groups + 1) ** options.zipf_alpha
            groups = rng.choice(options.groups, options.num_requests, p=weights / weights.sum())
        else:
            groups = np.arange(options.num_requests) % options.groups
        questions = rng.integers(0, options.prompts_per_group, options.num_requests)
        requests = []
        for index in range(options.num_requests):
            group = int(groups[index])
            question = group * options.prompts_per_group + int(questions[index])
            segments = [
                ("system", 1 + group, options.system_len),
                ("user", 1_000_000 + question, options.question_len),
            ]
            requests.append(
                SynthRequest(int(arrivals[index]), f"group-{group}", segments, options.output_len)
            )
        return requests
    agent = options.workload == "agent"
    num_sessions = max(1, -(-options.num_requests // options.turns))
    starts = np.cumsum(_gaps(rng, options, num_sessions)) * options.turns
    requests = []
    next_segment = 10_000_000
    for session in range(num_sessions):
        head = [("system", 1, options.system_len)]
        if agent:
            head.append(("tools", 2, options.tools_len))
        history: list = []
        clock = float(starts[session])
        for _turn in range(options.turns):
            if len(requests) >= options.num_requests:
                break
            next_segment += 1
            role = "tool" if agent and history else "user"
            turn = [(role, next_segment, options.turn_len)]
            kept = history[-2 * options.window :] if options.window > 0 else history
            requests.append(
                SynthRequest(
                    int(clock), f"session-{session}", head + kept + turn, options.output_len
                )
            )
            next_segment += 1
            history = history + turn + [("assistant", next_segment, options.output_len)]
            clock += options.output_len * 20.0 + rng.exponential(options.think_time_s * 1000)
    requests.sort(key=lambda request: request.timestamp_ms)
    return requests


def reference_hash_ids(options: SynthOptions, requests: list[SynthRequest]) -> list[list[int]]:
    table: dict = {}
    out = []
    for request in requests:
        ids, parent, pieces, filled = [], -1, [], 0
        for _, segment_id, length in request.segments:
            offset = 0
            while offset < length:
                take = min(options.block_size - filled, length - offset)
                pieces.append((segment_id, offset, take))
                filled += take
                offset += take
                if filled == options.block_size:
                    parent = table.setdefault((parent, tuple(pieces)), len(table))
                    ids.append(parent)
                    pieces, filled = [], 0
        if pieces:
            ids.append(table.setdefault((parent, tuple(pieces)), len(table)))
        out.append(ids)
    return out


@settings(max_examples=80, deadline=None)
@given(
    workload=st.sampled_from(["shared-prefix", "chat", "agent"]),
    num_requests=st.integers(1, 400),
    seed=st.integers(0, 50),
    arrival=st.sampled_from(["poisson", "bursty"]),
    zipf=st.sampled_from([None, 0.7, 1.3]),
    turns=st.integers(1, 6),
    window=st.integers(0, 3),
    lengths=st.tuples(*[st.integers(0, 40)] * 4),
    block_size=st.integers(1, 16),
    rate=st.sampled_from([0.5, 10.0, 1000.0]),
)
def test_streamed_hash_ids_equal_the_sorted_list(
    workload, num_requests, seed, arrival, zipf, turns, window, lengths, block_size, rate
):
    system_len, turn_len, output_len, tools_len = lengths
    options = SynthOptions(
        workload=workload,
        num_requests=num_requests,
        seed=seed,
        arrival=arrival,
        rate=rate,
        groups=5,
        prompts_per_group=3,
        system_len=system_len,
        question_len=turn_len,
        output_len=output_len,
        zipf_alpha=zipf,
        turns=turns,
        turn_len=turn_len,
        window=window,
        tools_len=tools_len,
        output="hash-ids",
        block_size=block_size,
    )
    expected = reference_requests(options)
    lines = list(iter_lines(options))
    assert [line["timestamp"] for line in lines] == [r.timestamp_ms for r in expected]
    assert [line["session_id"] for line in lines] == [r.session_id for r in expected]
    assert [line["input_length"] for line in lines] == [r.input_length for r in expected]
    assert [line["hash_ids"] for line in lines] == reference_hash_ids(options, expected)


def test_a_long_chat_holds_only_its_running_sessions(tmp_path):
    """The interner forgets each finished session: its tables stay at the running ones."""
    from pcache.traces.synth import BlockInterner

    options = SynthOptions(workload="chat", num_requests=4000, output="hash-ids", turns=4)
    sizes = []
    original = BlockInterner.forget

    def forget(self, scope):
        original(self, scope)
        sizes.append(len(self.scoped))

    BlockInterner.forget = forget
    try:
        for _ in iter_lines(options):
            pass
    finally:
        BlockInterner.forget = original
    assert len(sizes) == 1000  # every session ended and was forgotten
    assert max(sizes) < 250  # the sessions running at once, not all 1,000


def test_cli_writes_the_same_file_twice(tmp_path):
    command = [sys.executable, "-m", "pcache", "trace", "synth", "--workload", "agent"]
    command += ["-n", "300", "--output-format", "hash-ids", "--seed", "3"]
    first = subprocess.run([*command, "-o", str(tmp_path / "a.jsonl")], check=True)
    second = subprocess.run(command, check=True, capture_output=True)
    assert first.returncode == 0
    assert (tmp_path / "a.jsonl").read_bytes() == second.stdout
    lines = [orjson.loads(line) for line in second.stdout.splitlines()]
    assert len(lines) == 300
