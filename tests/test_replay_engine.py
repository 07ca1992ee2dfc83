"""`pcache replay --engine`: the trace through the engine, cache on and off, on the CPU.

The engine and the simulator drive the same block pool, so they must agree on the cached
tokens of every request; the cache must not change greedy outputs; the pool must be intact
and unreferenced after each run (the driver asserts both, so a run that finishes proves it).
"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")

from tests.conftest import SAMPLES
from tests.test_bad_input import one_line_error

TRACES = SAMPLES / "traces"
TOP_LEVEL = (
    "cache_on",
    "cache_off",
    "speedup_p50",
    "speedup_mean",
    "token_hit_rate",
    "outputs_equal",
    "predicted_speedup_p50",
    "prediction_error_p50",
    "cached_tokens_match",
)
PER_REQUEST = (
    "request",
    "prompt_tokens",
    "cached_tokens",
    "predicted_cached_tokens",
    "ttft_ms",
    "ttft_uncached_ms",
    "output_token_ids",
)


def engine_replay(cli, tmp_path, trace, *args):
    """The JSON report and the per-request rows of an engine replay on the tiny model (one
    warm-up round: these tests check what the runs compute, not how fast)."""
    rows_path = tmp_path / "rows.jsonl"
    result = cli(
        "replay", trace, "--engine", "cpu", "--model", "tiny", "-o", rows_path, "-f", "json",
        "--warmup", "1", *args,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in rows_path.read_text().splitlines()]
    return json.loads(result.stdout), rows


def assert_agreement(report, rows):
    assert report["cached_tokens_match"] is True and report["mismatched_requests"] == []
    assert [row["cached_tokens"] for row in rows] == [
        row["predicted_cached_tokens"] for row in rows
    ]
    assert report["outputs_equal"] is True
    assert report["cache_off"]["cached_tokens"] == 0
    assert report["hit_tokens"] == sum(row["cached_tokens"] for row in rows)


def write_trace(path, prompts, outputs=None, gap_ms=1.0):
    outputs = outputs or [1] * len(prompts)
    path.write_text(
        "".join(
            json.dumps({"timestamp": i * gap_ms, "token_ids": p, "output_length": n}) + "\n"
            for i, (p, n) in enumerate(zip(prompts, outputs, strict=True))
        )
    )
    return path


def seeded(seed: int, length: int, vocab: int = 512) -> list[int]:
    import random

    generator = random.Random(seed)
    return [generator.randrange(vocab) for _ in range(length)]


def test_json_fields_and_per_request_rows(cli, tmp_path):
    plot = tmp_path / "ttft.png"
    report, rows = engine_replay(cli, tmp_path, TRACES / "shared_prefix.jsonl", "--plot", plot)
    for key in TOP_LEVEL:
        assert key in report, key
    for run in ("cache_on", "cache_off"):
        assert set(report[run]["ttft_ms"]) == {"p50", "p90", "p99", "mean"}
        assert report[run]["wall_s"] > 0 and report[run]["prefill_tokens_computed"] > 0
    assert report["mode"] == "engine" and report["model"] == "tiny"
    assert report["cache_on"]["prefill_tokens_computed"] == report["query_tokens"] - sum(
        row["cached_tokens"] for row in rows
    )
    assert report["cache_off"]["prefill_tokens_computed"] == report["query_tokens"]
    assert report["token_hit_rate"] == pytest.approx(0.757, abs=0.001)
    assert [set(PER_REQUEST) <= set(row) for row in rows] == [True] * 12
    assert all(len(row["output_token_ids"]) == 4 for row in rows)  # the trace's output_length
    assert report["speedup_p50"] == pytest.approx(
        report["cache_off"]["ttft_ms"]["p50"] / report["cache_on"]["ttft_ms"]["p50"], rel=1e-3
    )
    assert report["prediction_error_p50"] == pytest.approx(
        report["predicted_ttft_ms"]["p50"] / report["cache_on"]["ttft_ms"]["p50"] - 1, abs=1e-3
    )
    assert report["calibration"]["samples"] == 12 + report["calibration"]["probes"]
    assert_agreement(report, rows)
    assert plot.stat().st_size > 1000


def test_token_ids_with_eviction_and_decode_that_fills_blocks(cli, tmp_path):
    """A small pool evicts; 20-token outputs fill blocks (their KV is cached too), and a
    later prompt that continues an earlier conversation hits the blocks decoding filled."""
    head = [seeded(1, 64), seeded(2, 80)]
    prompts = [head[0] + seeded(10, 9), head[1] + seeded(11, 20), head[0] + seeded(12, 3)]
    first, rows = engine_replay(
        cli, tmp_path, write_trace(tmp_path / "a.jsonl", prompts, [20, 20, 20])
    )
    assert_agreement(first, rows)
    # the next turn: the first prompt, what the engine answered, and a new question
    follow_up = prompts[0] + rows[0]["output_token_ids"] + seeded(13, 7)
    prompts += [follow_up, head[1] + seeded(14, 30), follow_up + seeded(15, 5)]
    trace = write_trace(tmp_path / "b.jsonl", prompts, [20] * len(prompts))
    unlimited, rows = engine_replay(cli, tmp_path, trace)
    assert_agreement(unlimited, rows)
    # 73 prompt tokens + 19 decoded ones written: 5 full blocks, one more than the prompt's 4
    assert rows[3]["cached_tokens"] == 80
    small, rows = engine_replay(cli, tmp_path, trace, "--cache-blocks", "12")
    assert_agreement(small, rows)
    assert small["evicted_blocks"] > 0 and small["hit_tokens"] < unlimited["hit_tokens"]


def test_request_trace_keeps_the_sharing_of_its_tokenizer(cli, tmp_path):
    """o200k ids are beyond tiny's 512-token vocabulary: mapped one to one, the engine sees
    the same sharing the simulator sees with the same tokenizer."""
    trace = TRACES / "requests_tiny.jsonl"
    report, rows = engine_replay(cli, tmp_path, trace, "-t", "o200k_base")
    assert_agreement(report, rows)
    simulated = cli("replay", trace, "-t", "o200k_base", "-f", "json")
    assert simulated.exit_code == 0, simulated.output
    assert report["hit_tokens"] == json.loads(simulated.stdout)["hit_tokens"] > 0


@pytest.mark.parametrize("concurrency", ["serial", "timed"])
def test_hash_id_traces(cli, tmp_path, concurrency):
    for name in ("mooncake_tiny.jsonl", "bailian_tiny.jsonl"):
        report, rows = engine_replay(
            cli, tmp_path, TRACES / name, "--concurrency", concurrency, "--max-output-tokens", "3"
        )
        assert_agreement(report, rows)
        assert report["concurrency"] == concurrency and report["hit_tokens"] > 0
        assert all(len(row["output_token_ids"]) <= 3 for row in rows)


def test_timed_burst_shares_blocks_between_running_requests(cli, tmp_path):
    """All arrivals at once (--time-scale 0): requests run batched and hold shared blocks."""
    report, rows = engine_replay(
        cli,
        tmp_path,
        TRACES / "shared_prefix.jsonl",
        "--concurrency",
        "timed",
        "--time-scale",
        "0",
        "--limit",
        "6",
    )
    assert_agreement(report, rows)
    assert report["peak_shared_blocks"] > 0 and report["kv_bytes_saved"] > 0


def test_limit_and_prompt_cut_are_reported(cli, tmp_path):
    report, rows = engine_replay(
        cli,
        tmp_path,
        TRACES / "shared_prefix.jsonl",
        "--limit",
        "5",
        "--max-prompt-tokens",
        "1100",
    )
    assert len(rows) == 5 and all(row["prompt_tokens"] == 1100 for row in rows)
    assert report["cut"] == {
        "requests_dropped": 7,
        "prompt_tokens_dropped": 5 * 52,
        "prompts_truncated": 5,
        "output_tokens_dropped": 0,
        "outputs_capped": 0,
    }
    assert_agreement(report, rows)


def test_repeat_reports_medians_and_each_run(cli, tmp_path):
    report, rows = engine_replay(cli, tmp_path, TRACES / "bailian_tiny.jsonl", "--repeat", "3")
    assert report["repeat"] == 3 and len(report["cache_on"]["ttft_ms_runs"]) == 3
    assert_agreement(report, rows)


def test_calibration_file_feeds_the_simulator(cli, tmp_path):
    saved = tmp_path / "calibration.json"
    report, _ = engine_replay(
        cli, tmp_path, TRACES / "bailian_tiny.jsonl", "--save-calibration", saved
    )
    data = json.loads(saved.read_text())
    assert data["model"] == report["ttft_model"]
    assert (data["engine_model"], data["dtype"], data["device"]) == ("tiny", "float32", "cpu")
    assert data["date"] and data["machine"]
    simulated = cli(
        "replay",
        TRACES / "bailian_tiny.jsonl",
        "--calibration",
        saved,
        "-f",
        "json",
        "-o",
        tmp_path / "sim.jsonl",
    )
    assert simulated.exit_code == 0, simulated.output
    assert json.loads(simulated.stdout)["ttft_model"] == data["model"]
    from pcache.replayer.ttft import TtftModel

    model = TtftModel(**data["model"])
    for line in (tmp_path / "sim.jsonl").read_text().splitlines():
        row = json.loads(line)
        expected = model.predict(row["prompt_tokens"], row["cached_tokens"])
        assert row["ttft_ms"] == pytest.approx(expected, abs=1e-3)


def test_text_report(cli):
    result = cli("replay", TRACES / "bailian_tiny.jsonl", "--engine", "cpu", "--model", "tiny")
    assert result.exit_code == 0, result.output
    for label in ("cache on", "cache off", "speedup", "cached tokens match", "TTFT model"):
        assert label in result.stdout


def test_bad_input_is_one_line(cli, tmp_path):
    long = write_trace(tmp_path / "long.jsonl", [seeded(1, 10), seeded(2, 2100)])
    one_line_error(
        cli("replay", long, "--engine", "cpu", "--model", "tiny"),
        "long.jsonl:2:",
        "exceeds the model's 2048 positions",
    )
    distinct = write_trace(tmp_path / "ids.jsonl", [list(range(1000, 1600))])
    one_line_error(
        cli("replay", distinct, "--engine", "cpu", "--model", "tiny"),
        "ids.jsonl:",
        "600 distinct token ids",
    )
    one_line_error(
        cli("replay", TRACES / "bailian_tiny.jsonl", "--engine", "cpu", "--model", "llama3-70b"),
        "too little memory",
    )
    one_line_error(
        cli("replay", TRACES / "bailian_tiny.jsonl", "--engine", "cpu", "--model", "gpt-oss-20b"),
        "unsupported architecture",
    )
    one_line_error(
        cli(
            "replay",
            TRACES / "bailian_tiny.jsonl",
            "--engine",
            "cpu",
            "--model",
            "tiny",
            "--cache-blocks",
            "1",
        ),
        "cannot hold its largest request",
    )
    bad_calibration = tmp_path / "calibration.json"
    bad_calibration.write_text('{"format": "something else"}')
    one_line_error(
        cli("replay", TRACES / "bailian_tiny.jsonl", "--calibration", bad_calibration),
        "calibration.json: not a TTFT calibration file",
    )


def test_gpu_without_cuda_is_one_line(cli):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device")
    for args in (("--gpu",), ("--engine", "gpu")):
        one_line_error(
            cli("replay", TRACES / "bailian_tiny.jsonl", *args, "--model", "tiny"),
            "--gpu needs a CUDA device",
        )


def test_two_engines_share_weights_with_their_own_kv_caches():
    """The serial replay's setup: outputs of two engines over one runner equal a lone one's."""
    from pcache.engine.config import EngineConfig
    from pcache.engine.engine import Engine

    prompts = [seeded(3, 40), seeded(3, 40)[:32] + seeded(4, 9)]
    alone = [
        s.output_token_ids for s in Engine(EngineConfig(num_kv_blocks=20)).generate(prompts, 5)
    ]
    first = Engine(EngineConfig(num_kv_blocks=20))
    second = Engine(EngineConfig(num_kv_blocks=20, enable_prefix_caching=False), first.runner)
    assert second.runner.model is first.runner.model and second.kv_cache is not first.kv_cache
    for engine in (first, second, first):
        assert [s.output_token_ids for s in engine.generate(prompts, 5)] == alone
        engine.check_integrity()
        engine.reset()


def test_arrival_time_is_the_callers():
    import time

    from pcache.engine.config import EngineConfig
    from pcache.engine.engine import Engine

    engine = Engine(EngineConfig(num_kv_blocks=8))
    arrival = time.perf_counter() - 0.5  # arrived half a second ago, queued elsewhere
    request_id = engine.add_request(seeded(5, 20), 1, arrival_time=arrival)
    engine.run_until_done()
    sequence = engine.sequences[request_id]
    assert sequence.arrival_time == arrival and sequence.first_token_time - arrival >= 0.5


SYSTEM = (
    "You are a careful assistant for the billing team. Answer briefly, cite the invoice"
    " number, and never guess an amount you cannot see on the invoice itself."
)


def test_a_model_directory_renders_with_its_own_tokenizer(cli, tmp_path):
    """A model directory with tokenizer.json renders a request log with its tokenizer and
    chat template: the engine's prompts are transformers' apply_chat_template ids."""
    import shutil

    from tests.engine_helpers import save_reference_checkpoint
    from tests.fixtures import hf_model_dir, hf_reference_tokenizer

    tokenizer = hf_model_dir("qwen3")
    reference = hf_reference_tokenizer("qwen3")
    model = tmp_path / "qwen3-tiny"
    save_reference_checkpoint(
        "tiny-qwen3", model, vocab_size=len(reference), tie_word_embeddings=True
    )
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(tokenizer / name, model / name)
    questions = ("What is due on invoice 1042?", "Has invoice 1043 been paid in full?")
    requests = [
        {
            "messages": [
                {"role": "system", "content": SYSTEM},
                {"role": "user", "content": question},
            ],
            "max_tokens": 2,
        }
        for question in questions
    ]
    log = tmp_path / "requests.jsonl"
    log.write_text("".join(json.dumps(request) + "\n" for request in requests))

    report, rows = engine_replay(cli, tmp_path, log, "--model", model)
    expected = [
        reference.apply_chat_template(
            request["messages"], add_generation_prompt=True, tokenize=True, return_dict=False
        )
        for request in requests
    ]
    assert [row["prompt_tokens"] for row in rows] == [len(ids) for ids in expected]
    for index, request in enumerate(requests):
        single = tmp_path / f"request{index}.json"
        single.write_text(json.dumps(request))
        hashed = cli("hash", single, "-t", model, "--format", "json")
        assert hashed.exit_code == 0, hashed.output
        assert json.loads(hashed.stdout)["num_tokens"] == rows[index]["prompt_tokens"]
    # the second prompt reuses the full blocks of the rendered system prompt both share
    common = next(i for i, (a, b) in enumerate(zip(*expected, strict=False)) if a != b)
    assert common > 16 and rows[0]["cached_tokens"] == 0
    assert rows[1]["cached_tokens"] == common // 16 * 16
    assert all(token < len(reference) for row in rows for token in row["output_token_ids"])
    assert_agreement(report, rows)


class ScriptedLoad:
    """A load meter whose readings follow a script (cycled): the driver's repeat and warning
    logic runs as it does on a real machine, only the readings are chosen."""

    def __init__(self, others_running: list[int], averages: list[float] | None = None):
        self.others_running = others_running
        self.averages = averages or [0.5]
        self.reads = 0

    def read(self):
        from pcache.process.machine import LoadReading

        index = self.reads
        self.reads += 1
        average = self.averages[min(index, len(self.averages) - 1)]
        return LoadReading(average, self.others_running[index % len(self.others_running)])


def replay_with_load(meter, concurrency="serial", repeat=1, threads=1):
    from pcache.replayer.engine.driver import replay_engine
    from pcache.replayer.run import replay_options

    options = replay_options(
        "engine", model="tiny", device="cpu", warmup_rounds=0, keep_requests=True,
        threads=threads, concurrency=concurrency, repeat=repeat,
    )  # fmt: skip
    report, _, _ = replay_engine(TRACES / "shared_prefix_hash_ids.jsonl", options, None, meter)
    return report


def test_a_quiet_machine_repeats_nothing():
    report = replay_with_load(ScriptedLoad([0]))
    stability = report.measurement.stability
    assert (stability.pairs, stability.repeated_pairs, stability.repeats) == (12, 0, 0)
    assert stability.unsettled_pairs == 0 and stability.threads == 1
    assert stability.hit_pairs == sum(1 for r in report.per_request if r.cached_tokens)
    assert not any("straddled" in w or "load average" in w for w in stability.warnings)
    assert report.measurement.cached_tokens_match


def test_pairs_that_straddle_a_load_change_are_measured_again_within_bounds():
    # another process starts and stops running at every other reading: every pair straddles
    report = replay_with_load(ScriptedLoad([0, 1]))
    stability = report.measurement.stability
    assert stability.repeats == 12  # the budget: one repeat per pair
    assert 0 < stability.repeated_pairs <= stability.repeats
    assert stability.unsettled_pairs == 12
    assert any("12 of 12 pairs straddled a load change" in w for w in stability.warnings)
    # repeats give back what the cache-on run published: the engine still agrees with the
    # simulator on every request, and the pool evicted nothing
    assert report.measurement.cached_tokens_match and report.evicted_blocks == 0
    assert report.measurement.outputs_equal


def test_a_steady_load_is_no_change_and_a_small_wobble_on_a_busy_machine_neither():
    for script in ([1], [10, 11, 10]):
        stability = replay_with_load(ScriptedLoad(script)).measurement.stability
        assert stability.repeats == 0 and stability.unsettled_pairs == 0, script


def test_timed_repetitions_that_straddle_are_measured_again():
    stability = replay_with_load(
        ScriptedLoad([0, 0, 2]), concurrency="timed", repeat=2
    ).measurement.stability
    # the budget (one repeat per repetition) is spent on the first, measured three times
    assert (stability.pairs, stability.repeats, stability.repeated_pairs) == (2, 2, 1)
    assert stability.unsettled_pairs == 2


def test_a_moving_load_average_is_a_warning_in_text_and_json(cli, monkeypatch):
    from pcache.replayer.engine import driver as engine_driver

    original = engine_driver.replay_engine
    meter = ScriptedLoad([0], averages=[0.2, 3.5])
    monkeypatch.setattr(
        engine_driver, "replay_engine", lambda *a, **k: original(*a, load_meter=meter, **k)
    )
    args = ("replay", TRACES / "shared_prefix_hash_ids.jsonl", "--engine", "cpu", "--model",
            "tiny", "--warmup", "0", "--threads", "1")  # fmt: skip
    text = cli(*args)
    assert text.exit_code == 0, text.output
    assert "per-pair speedup" in text.stdout and "load average" in text.stdout
    assert "warning: the load average moved from 0.20 to 3.50" in text.stderr
    meter.reads = 0
    data = cli(*args, "-f", "json")
    stability = json.loads(data.stdout)["stability"]
    assert stability["threads"] == 1 and stability["load_average_after"] == 3.5
    assert any("load average moved" in w for w in stability["warnings"])
    assert "load average moved" in data.stderr


def test_threads_are_checked_and_default_to_the_physical_cores(cli):
    from pcache.process.machine import physical_cores

    one_line_error(
        cli("replay", TRACES / "bailian_tiny.jsonl", "--engine", "cpu", "--model", "tiny",
            "--threads", "0"),
        "--threads",
    )  # fmt: skip
    one_line_error(cli("replay", TRACES / "bailian_tiny.jsonl", "--threads", "2"), "--threads")
    report = replay_with_load(ScriptedLoad([0]), threads=None)
    assert report.measurement.stability.threads == physical_cores() >= 1
