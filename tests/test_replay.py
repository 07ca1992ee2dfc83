"""`pcache replay --simulate` and `pcache trace synth` through the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import ROOT, SAMPLES

TRACES = SAMPLES / "traces"
MOONCAKE = ROOT.parent / "shared" / "traces" / "mooncake"
if not MOONCAKE.is_dir():  # a worktree checkout: shared/ sits beside the main clone
    MOONCAKE = Path("/work/shared/traces/mooncake")


def replay_json(cli, *args):
    result = cli("replay", *args, "--simulate", "--format", "json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize(("name", "ratio"), [("conversation", 0.374), ("synthetic", 0.651)])
def test_mooncake_unlimited_ratios(cli, name, ratio):
    path = MOONCAKE / f"{name}_trace.jsonl"
    if not path.is_file():
        pytest.skip(f"{path} is absent (shared/traces is not beside this checkout)")
    report = replay_json(cli, path)
    assert report["trace_format"] == "mooncake" and report["block_size"] == 512
    assert round(report["token_hit_rate"], 3) == ratio
    assert report["evicted_blocks"] == 0


def test_mooncake_sample_unlimited(cli):
    report = replay_json(cli, TRACES / "mooncake_tiny.jsonl")
    assert (report["requests"], report["query_tokens"], report["hit_tokens"]) == (5, 5400, 2636)
    assert report["request_hit_rate"] == pytest.approx(0.6)
    assert report["peak_used_blocks"] == 7
    for key in ("token_hit_rate", "evicted_blocks", "kv_bytes_saved", "ttft_ms"):
        assert key in report


@pytest.mark.parametrize(("policy", "evicted"), [("vllm", 5), ("radix", 6)])
def test_mooncake_sample_finite(cli, policy, evicted):
    report = replay_json(
        cli, TRACES / "mooncake_tiny.jsonl", "--cache-blocks", "4", "--policy", policy
    )
    assert report["hit_tokens"] == 2048 and report["evicted_blocks"] == evicted
    assert report["peak_used_blocks"] == 4
    assert report["prefill_kv_bytes_reused"] == 2048 * 131072
    assert report["kv_bytes_saved"] == 0  # serial: one request holds blocks at a time


def test_impossible_capacity_is_a_clear_error(cli):
    result = cli("replay", TRACES / "mooncake_tiny.jsonl", "--simulate", "--cache-blocks", "2")
    assert result.exit_code == 2
    assert "mooncake_tiny.jsonl: a capacity of 2 blocks cannot hold" in result.output
    assert "cannot hold the request at line 2" in result.output
    assert "Traceback" not in result.output


def test_bailian_sample(cli):
    report = replay_json(cli, TRACES / "bailian_tiny.jsonl")
    assert report["trace_format"] == "bailian" and report["block_size"] == 16
    assert (report["query_tokens"], report["hit_tokens"]) == (130, 64)


def test_request_sample_matches_token_prefixes(cli, tmp_path):
    """Unlimited vLLM hits equal the longest shared full-block prefix (last token recomputed)."""
    from pcache.pipeline import Settings, hash_request, iter_requests
    from pcache.replayer.ttft import TtftModel

    path = TRACES / "requests_tiny.jsonl"
    out = tmp_path / "per_request.jsonl"
    report = replay_json(cli, path, "--tokenizer", "o200k_base", "--output", out)
    settings = Settings(tokenizer="o200k_base")
    prompts = [hash_request(r, settings).rendered.token_ids for r in iter_requests(path)]
    expected = []
    for index, tokens in enumerate(prompts):
        best = 0
        for earlier in prompts[:index]:
            common = 0
            while common < min(len(tokens), len(earlier)) and tokens[common] == earlier[common]:
                common += 1
            best = max(best, common)
        expected.append(min(best // 16, (len(tokens) - 1) // 16) * 16)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [row["cached_tokens"] for row in rows] == expected
    assert [row["prompt_tokens"] for row in rows] == [len(p) for p in prompts]
    assert report["hit_tokens"] == sum(expected) > 0
    assert report["observed_cached_tokens"] == 128
    model = TtftModel()
    for row in rows:
        assert row["ttft_ms"] == pytest.approx(
            model.predict(row["prompt_tokens"], row["cached_tokens"]), abs=1e-3
        )
        assert row["ttft_uncached_ms"] == pytest.approx(
            model.predict(row["prompt_tokens"], 0), abs=1e-3
        )


def test_text_report(cli):
    result = cli("replay", TRACES / "mooncake_tiny.jsonl", "--simulate", "--cache-blocks", "4")
    assert result.exit_code == 0, result.output
    for label in ("token hit rate", "37.9%", "request hit rate", "evicted blocks", "TTFT"):
        assert label in result.stdout


def test_malformed_lines_skipped_or_strict(cli, tmp_path):
    trace = tmp_path / "bad.jsonl"
    lines = (TRACES / "mooncake_tiny.jsonl").read_text().splitlines()
    lines.insert(2, '{"timestamp": 5, "input_length": "x", "hash_ids": [1]}')
    lines.insert(4, "{not json")
    lines.insert(5, '{"timestamp": 5, "input_length": 9, "hash_ids": [1, true]}')
    lines.insert(6, '{"timestamp": 5, "input_length": 9, "hash_ids": [1.5]}')
    trace.write_text("\n".join(lines) + "\n")
    result = cli("replay", trace, "--simulate", "--format", "json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["skipped_lines"] == 4 and report["requests"] == 5
    assert "bad.jsonl:3" in result.stderr and "bad.jsonl:5" in result.stderr
    assert "bad.jsonl:7: `hash_ids[0]` must be an integer, got a number" in result.stderr
    strict = cli("replay", trace, "--simulate", "--strict")
    assert strict.exit_code == 2 and "bad.jsonl:3" in strict.output


def test_out_of_order_timestamps_sorted_with_warning(cli, tmp_path):
    trace = tmp_path / "shuffled.jsonl"
    lines = (TRACES / "mooncake_tiny.jsonl").read_text().splitlines()
    trace.write_text("\n".join([lines[1], lines[0], *lines[2:]]) + "\n")
    result = cli("replay", trace, "--simulate", "--format", "json", "--cache-blocks", "4")
    assert result.exit_code == 0, result.output
    assert "out of order" in result.stderr
    report = json.loads(result.stdout)
    assert report["reordered"] is True and report["hit_tokens"] == 2048


def test_cache_gb_with_model_preset_and_config(cli, tmp_path):
    # llama-3-8b: 128 KiB per token; 512-token blocks are 64 MiB, so 0.25 GiB holds 4 blocks
    report = replay_json(cli, TRACES / "mooncake_tiny.jsonl", "--cache-gb", "0.25")
    assert report["capacity_blocks"] == 4 and report["hit_tokens"] == 2048
    config = tmp_path / "config.json"
    config.write_text(
        json.dumps(
            {
                "num_hidden_layers": 16,
                "num_attention_heads": 32,
                "num_key_value_heads": 8,
                "hidden_size": 4096,
                "torch_dtype": "bfloat16",
            }
        )
    )
    report = replay_json(
        cli, TRACES / "mooncake_tiny.jsonl", "--cache-gb", "0.125", "--model", config
    )
    assert report["kv_bytes_per_token"] == 65536 and report["capacity_blocks"] == 4
    bad = cli("replay", TRACES / "mooncake_tiny.jsonl", "--simulate", "--model", "nope")
    assert bad.exit_code == 2 and "preset" in bad.output


def test_capacity_sweep_and_plot(cli, tmp_path):
    png = tmp_path / "sweep.png"
    result = cli(
        "replay",
        TRACES / "mooncake_tiny.jsonl",
        "--simulate",
        "--capacity-sweep",
        "--plot",
        png,
        "--format",
        "json",
    )
    assert result.exit_code == 0, result.output
    sweep = json.loads(result.stdout)["sweep"]
    capacities = [row["capacity_blocks"] for row in sweep]
    assert capacities[0] == 3 and capacities[-1] == 7 and capacities == sorted(capacities)
    rates = [row["token_hit_rate"] for row in sweep]
    assert rates[-1] == pytest.approx(2636 / 5400)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = cli("replay", TRACES / "mooncake_tiny.jsonl", "--simulate", "--capacity-sweep")
    assert text.exit_code == 0 and "cache blocks" in text.stdout


def test_timed_concurrency_holds_blocks(cli):
    """Running requests keep their blocks: with 4 blocks, request 4 waits for all three."""
    serial = replay_json(cli, TRACES / "mooncake_tiny.jsonl", "--cache-blocks", "4")
    timed = replay_json(
        cli, TRACES / "mooncake_tiny.jsonl", "--cache-blocks", "4", "--concurrency", "timed"
    )
    assert timed["concurrency"] == "timed" and timed["requests"] == 5
    assert (timed["hit_tokens"], timed["evicted_blocks"]) == (2048, 5)
    # request 2 finishes at 10 + 79.4 ms prefill + 30 tokens x 20 ms = 689.4 ms
    assert timed["ttft_ms"]["p99"] > 600 > serial["ttft_ms"]["p99"]
    unlimited = replay_json(cli, TRACES / "mooncake_tiny.jsonl", "--concurrency", "timed")
    assert unlimited["hit_tokens"] == 2636


@pytest.mark.parametrize("provider", ["openai", "anthropic", "gemini", "deepseek"])
def test_provider_profiles_bill(cli, provider, tmp_path):
    trace = tmp_path / "provider.jsonl"
    rows = [
        {"timestamp": 0, "input_length": 4096, "hash_ids": [1, 2, 3, 4, 5, 6, 7, 8]},
        {"timestamp": 1000, "input_length": 4096, "hash_ids": [1, 2, 3, 4, 5, 6, 7, 9]},
        {"timestamp": 10_000_000, "input_length": 4096, "hash_ids": [1, 2, 3, 4, 5, 6, 7, 10]},
    ]
    trace.write_text("".join(json.dumps(row) + "\n" for row in rows))
    report = replay_json(cli, trace, "--policy", provider)
    # the second request reuses 7 blocks (3,584 tokens: past every minimum, on every step);
    # the third comes after every TTL and hits nothing
    assert report["hit_tokens"] == 3584 and report["hit_requests"] == 1
    bill = report["bill"]
    assert bill["cost_with_cache"] < bill["cost_without_cache"]


def test_trace_synth_is_deterministic_and_replays(cli, tmp_path):
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    base = (
        "trace",
        "synth",
        "--workload",
        "chat",
        "-n",
        "40",
        "--seed",
        "7",
        "--turn-len",
        "40",
        "--system-len",
        "100",
    )
    args = (*base, "--output-format", "token-ids")
    assert cli(*args, "-o", first).exit_code == 0
    assert cli(*args, "-o", second).exit_code == 0
    assert first.read_bytes() == second.read_bytes()
    report = replay_json(cli, first)
    assert report["requests"] == 40 and report["token_hit_rate"] > 0.5
    hashed = tmp_path / "h.jsonl"
    assert cli(*base, "--output-format", "hash-ids", "-o", hashed).exit_code == 0
    hash_report = replay_json(cli, hashed)
    assert hash_report["query_tokens"] == report["query_tokens"]


def test_trace_synth_workloads(cli, tmp_path):
    out = tmp_path / "w.jsonl"
    shared = ("--system-len", "64", "--question-len", "16", "-n", "60")
    for workload in ("shared-prefix", "agent"):
        assert cli("trace", "synth", "--workload", workload, *shared, "-o", out).exit_code == 0
        rows = [json.loads(line) for line in out.read_text().splitlines()]
        assert len(rows) == 60 and all("messages" in row for row in rows)
        stamps = [row["timestamp"] for row in rows]
        assert stamps == sorted(stamps)
    zipf = cli(
        "trace",
        "synth",
        "--zipf-alpha",
        "1.2",
        "--arrival",
        "bursty",
        "--output-format",
        "hash-ids",
        *shared,
        "-o",
        out,
    )
    assert zipf.exit_code == 0
    window = cli(
        "trace",
        "synth",
        "--workload",
        "chat",
        "--window",
        "2",
        "--turns",
        "6",
        "--output-format",
        "hash-ids",
        *shared,
        "-o",
        out,
    )
    assert window.exit_code == 0
    windowed = replay_json(cli, out)
    full = cli(
        "trace",
        "synth",
        "--workload",
        "chat",
        "--turns",
        "6",
        "--output-format",
        "hash-ids",
        *shared,
        "-o",
        out,
    )
    assert full.exit_code == 0
    assert replay_json(cli, out)["token_hit_rate"] > windowed["token_hit_rate"]
    bad = cli("trace", "synth", "--workload", "nope")
    assert bad.exit_code == 2 and "workload" in bad.output


def test_simulate_is_the_default(cli):
    sample = TRACES / "mooncake_tiny.jsonl"
    implicit = cli("replay", sample, "--format", "json")
    assert implicit.exit_code == 0, implicit.output
    assert json.loads(implicit.stdout) == replay_json(cli, sample)
    assert json.loads(implicit.stdout)["mode"] == "simulate"


def test_model_table_names_work_for_replay(cli):
    """generate's preset names and replay's older spellings name the same shapes."""
    sample = TRACES / "mooncake_tiny.jsonl"
    new = replay_json(cli, sample, "--cache-gb", "0.25", "--model", "llama3-8b")
    old = replay_json(cli, sample, "--cache-gb", "0.25", "--model", "llama-3-8b")
    assert new == old and new["model"] == "llama3-8b" and new["capacity_blocks"] == 4
    tiny = replay_json(cli, sample, "--model", "tiny")
    assert tiny["kv_bytes_per_token"] == 2 * 2 * 2 * 16 * 2  # K+V, 2 layers, 2 heads, dim 16


def test_bad_options(cli):
    sample = TRACES / "mooncake_tiny.jsonl"
    for args, message in (
        (("--simulate", "--engine", "cpu"), "give one of --simulate, --engine, --gpu and"),
        (("--engine", "cpu", "--gpu"), "not --engine and --gpu"),
        (("--simulate", "--gpu"), "not --simulate and --gpu"),
        (("--engine", "tpu", "--model", "tiny"), "--engine must be cpu or gpu"),
        (("--engine", "cpu"), "--engine needs --model"),
        (("--simulate", "--repeat", "3"), "--repeat applies to --engine"),
        (("--engine", "cpu", "--model", "tiny", "--calibration", "c.json"), "--calibration"),
        (("--policy", "lfu"), "--policy"),
        (("--simulate", "--concurrency", "async"), "--concurrency"),
        (("--simulate", "--plot", "x.png"), "--capacity-sweep"),
        (("--simulate", "--cache-blocks", "4", "--cache-gb", "1"), "not both"),
        (("--simulate", "--policy", "openai", "--cache-blocks", "4"), "hosted cache"),
    ):
        result = cli("replay", sample, *args)
        assert result.exit_code == 2 and message in result.output, (args, result.output)
    missing = cli("replay", "nope.jsonl", "--simulate")
    assert missing.exit_code == 2 and "nope.jsonl: no such file" in missing.output


def test_provider_rounding_and_ttl_refresh(cli, tmp_path):
    """OpenAI: nothing below 1,024 tokens, then 128-token steps; a hit refreshes the TTL."""
    trace = tmp_path / "openai.jsonl"
    rows = [
        {"timestamp": 0, "input_length": 1500, "hash_ids": [1, 2, 3]},  # blocks of 512
        {"timestamp": 1000, "input_length": 900, "hash_ids": [1, 4]},  # 512 < 1024: no hit
        {"timestamp": 500_000, "input_length": 1500, "hash_ids": [1, 2, 5]},  # 1024 exactly
        {"timestamp": 1_000_000, "input_length": 1600, "hash_ids": [1, 2, 3, 6]},  # refreshed
    ]
    trace.write_text("".join(json.dumps(row) + "\n" for row in rows))
    report = replay_json(cli, trace, "--policy", "openai")
    out = tmp_path / "rows.jsonl"
    replay_json(cli, trace, "--policy", "openai", "--output", out)
    cached = [json.loads(line)["cached_tokens"] for line in out.read_text().splitlines()]
    # block 3 was last used at 0 ms: expired (600 s TTL) at 1,000,000 ms; blocks 1-2 were
    # refreshed at 500,000 ms
    assert cached == [0, 0, 1024, 1024]
    assert report["hit_tokens"] == 2048


def test_bad_trace_files(cli, tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    binary = tmp_path / "binary.jsonl"
    binary.write_bytes(b"\x00\x01\x02")
    junk = tmp_path / "junk.jsonl"
    junk.write_text("[1, 2]\n{\n")
    no_logs = tmp_path / "no_logs"
    no_logs.mkdir()
    (no_logs / "notes.txt").write_text("{}\n")
    for path, message in (
        (empty, "empty"),
        (binary, "binary"),
        (tmp_path, "binary.jsonl"),  # a directory is one log: its first bad file is named
        (no_logs, "no request logs (.jsonl, .ndjson) in this directory"),
        (junk, "no valid requests"),
    ):
        result = cli("replay", path, "--simulate")
        assert result.exit_code == 2 and message in result.output, result.output
        assert "Traceback" not in result.output


def test_progress_bar_on_request(cli):
    result = cli("replay", TRACES / "mooncake_tiny.jsonl", "--simulate", "--progress")
    assert result.exit_code == 0, result.output
    assert "token hit rate" in result.stdout


def test_timed_replay_counts_physically_shared_blocks(cli, tmp_path):
    trace = tmp_path / "overlap.jsonl"
    lines = [
        {"timestamp": 0, "input_length": 1536, "output_length": 500, "hash_ids": [0, 1, 2]},
        {"timestamp": 1, "input_length": 1500, "output_length": 500, "hash_ids": [0, 1, 2]},
        {"timestamp": 2, "input_length": 1100, "output_length": 500, "hash_ids": [0, 1, 9]},
    ]
    trace.write_text("".join(json.dumps(line) + "\n" for line in lines))
    timed = replay_json(cli, trace, "--concurrency", "timed")
    # all three run at once: 9 block-table entries over 4 distinct blocks
    assert timed["peak_shared_blocks"] == 5
    assert timed["kv_bytes_saved"] == 5 * 512 * timed["kv_bytes_per_token"]
    serial = replay_json(cli, trace)
    assert serial["kv_bytes_saved"] == 0 and serial["peak_shared_blocks"] == 0
    assert serial["prefill_kv_bytes_reused"] == serial["hit_tokens"] * serial["kv_bytes_per_token"]


def test_package_layering():
    """The pool package reads no trace records and the replay package knows no CLI."""
    import ast

    def imported(package: str) -> set[str]:
        names = set()
        for path in (ROOT / "pcache" / package).glob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom) and node.module:
                    names.add(node.module)
                elif isinstance(node, ast.Import):
                    names.update(alias.name for alias in node.names)
        return names

    assert not {m for m in imported("cache") if m.startswith(("pcache.traces", "pcache.replayer"))}
    assert not {m for m in imported("replay") if m.startswith("pcache.cli")}
    assert not {m for m in imported("traces") if m.startswith(("pcache.cache", "pcache.replayer"))}


def test_ttft_fit_recovers_the_model_and_stays_non_negative():
    from pcache.replayer.calibration import fit_ttft_model
    from pcache.replayer.ttft import TtftModel

    truth = TtftModel(30.0, 0.5, 2e-4)
    lengths = (76, 152, 304, 608, 912, 1216)
    fit = fit_ttft_model([(n, 0, truth.predict(n, 0)) for n in lengths])
    assert fit.rank == 3 and fit.rms_error_ms == pytest.approx(0, abs=1e-6)
    for name in ("overhead_ms", "ms_per_token", "ms_per_pair"):
        assert getattr(fit.model, name) == pytest.approx(getattr(truth, name), rel=1e-6)
    # TTFT falling with length would need a negative cost per token: never fitted
    falling = fit_ttft_model([(n, 0, 100.0 - n / 100) for n in lengths])
    assert min(falling.model.overhead_ms, falling.model.ms_per_token) >= 0
    assert falling.model.ms_per_pair >= 0
    one_length = fit_ttft_model([(512, 0, 40.0), (512, 0, 42.0)])
    assert one_length.rank == 1
