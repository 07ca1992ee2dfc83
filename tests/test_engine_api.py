"""The engine's Python API: timestamps, preemption, sampling, request validation."""

from __future__ import annotations

import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

from pcache.engine.config import EngineConfig  # noqa: E402
from pcache.engine.engine import Engine  # noqa: E402
from pcache.errors import EngineError  # noqa: E402
from tests.conftest import ROOT  # noqa: E402

PROMPTS = [list(range(1, 40)), list(range(50, 75)), [3, 4, 5], list(range(100, 160))]


def test_timestamps_and_cached_tokens_per_request():
    engine = Engine(EngineConfig(model="tiny"))
    first = engine.add_request(PROMPTS[0], 4)
    engine.step()
    second = engine.add_request(PROMPTS[0] + [7], 4)
    engine.run_until_done()
    for request_id in (first, second):
        sequence = engine.sequences[request_id]
        assert sequence.arrival_time <= sequence.first_scheduled_time
        assert sequence.first_scheduled_time <= sequence.first_token_time
        assert sequence.first_token_time <= sequence.finish_time
        assert len(sequence.output_token_ids) == 4
    assert engine.sequences[first].num_cached_tokens == 0
    assert engine.sequences[second].num_cached_tokens == 32
    engine.check_integrity()


def test_preemption_under_a_small_pool_changes_nothing_but_order():
    roomy = Engine(EngineConfig(model="tiny", kv_cache_tokens=2048))
    expected = [s.output_token_ids for s in roomy.generate(PROMPTS, 24, ignore_eos=True)]
    tight = Engine(EngineConfig(model="tiny", num_kv_blocks=8, max_num_batched_tokens=32))
    ids = [tight.add_request(prompt, 24, ignore_eos=True) for prompt in PROMPTS]
    while tight.has_unfinished_requests():
        tight.step()
        tight.check_integrity()
    sequences = [tight.sequences[request_id] for request_id in ids]
    assert sum(s.num_preemptions for s in sequences) > 0
    assert [s.output_token_ids for s in sequences] == expected


def test_temperature_sampling_is_seeded():
    def sample(seed):
        engine = Engine(EngineConfig(model="tiny", seed=seed))
        request_id = engine.add_request(PROMPTS[2], 12, temperature=1.0)
        engine.run_until_done()
        return engine.sequences[request_id].output_token_ids

    assert sample(1) == sample(1)
    assert sample(1) != sample(2)


@pytest.mark.parametrize(
    ("prompt", "max_new_tokens", "message"),
    [
        ([], 4, "at least one token"),
        ([1, 512], 4, "token ids must be in [0, 512)"),
        ([1, 2], 0, "max_new_tokens must be at least 1"),
        ([1] * 2040, 16, "exceeds the model's 2048 positions"),
        ([1] * 100, 100, "too little memory for the KV cache"),
    ],
)
def test_add_request_rejects(prompt, max_new_tokens, message):
    engine = Engine(EngineConfig(model="tiny", kv_cache_tokens=128))
    with pytest.raises(EngineError) as failure:
        engine.add_request(prompt, max_new_tokens)
    assert message in str(failure.value)


def test_config_invariants():
    for options in ({"block_size": 24}, {"dtype": "float16"}, {"attention_backend": "cuda"}):
        with pytest.raises(AssertionError):
            EngineConfig(**options)


def test_cli_start_imports_no_torch():
    code = (
        "import sys, pcache.cli.app;"
        "heavy = [m for m in ('torch', 'triton', 'transformers') if m in sys.modules];"
        "print(heavy); sys.exit(1 if heavy else 0)"
    )
    completed = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True)
    assert completed.returncode == 0, completed.stdout


def test_abort_frees_blocks_of_waiting_and_running_requests_and_keeps_the_rest_exact():
    alone = Engine(EngineConfig(model="tiny"))
    expected = alone.generate([PROMPTS[1]], 6, ignore_eos=True)[0].output_token_ids
    engine = Engine(EngineConfig(model="tiny", max_num_seqs=2))
    running = engine.add_request(PROMPTS[0], 50, ignore_eos=True)
    kept = engine.add_request(PROMPTS[1], 6, ignore_eos=True)
    waiting = engine.add_request(PROMPTS[3], 50, ignore_eos=True)
    engine.step()
    engine.step()
    assert engine.sequences[waiting].first_scheduled_time is None
    engine.abort_request(running)
    engine.abort_request(waiting)
    engine.check_integrity()
    engine.run_until_done()
    engine.check_integrity()
    assert engine.kv_manager.usage == 0.0
    for request_id in (running, waiting):
        sequence = engine.release(request_id)
        assert sequence.aborted and sequence.is_finished
    assert engine.release(kept).output_token_ids == expected
    assert not engine.sequences
