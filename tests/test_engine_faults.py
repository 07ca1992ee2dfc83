"""Hostile sampling parameters and failing steps: one request fails, the engine runs on."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from pcache.engine.config import EngineConfig  # noqa: E402
from pcache.engine.engine import Engine  # noqa: E402
from pcache.engine.sampling import MIN_TEMPERATURE, Sampler, draw, safe_probabilities  # noqa: E402

VOCAB = 512
POISON = 499
"""A token id the fault injected below fails on."""

temperatures = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, 1e-40, 1e-30, MIN_TEMPERATURE / 2, MIN_TEMPERATURE, 1e-3, 2.0, 1e30]),
)
logit_values = st.one_of(
    st.floats(width=32, allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, 1e38, -1e38, math.inf, -math.inf, math.nan]),
)


@settings(max_examples=300, deadline=None)
@given(
    rows=st.lists(
        st.tuples(temperatures, st.integers(-5, 10_000), st.lists(logit_values, min_size=1)),
        min_size=1,
        max_size=4,
    ),
    width=st.integers(1, 40),
)
def test_every_row_gets_a_token_id_in_range_whatever_the_parameters(rows, width):
    logits = torch.zeros(len(rows), width)
    for index, (_, _, values) in enumerate(rows):
        row = torch.tensor((values * width)[:width], dtype=torch.float32)
        logits[index] = row
    sampler = Sampler(0, torch.device("cpu"))
    tokens = sampler(logits, [t for t, _, _ in rows], [k for _, k, _ in rows])
    assert len(tokens) == len(rows)
    assert all(0 <= token < width for token in tokens)
    for token, (temperature, _, _), row in zip(tokens, rows, logits, strict=True):
        if not temperature >= MIN_TEMPERATURE or math.isinf(temperature):
            assert token == int(row.argmax())  # tiny, zero, NaN and inf temperatures: greedy


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(logit_values, min_size=3, max_size=3), min_size=1, max_size=3))
def test_safe_probabilities_are_a_distribution(rows):
    probabilities = safe_probabilities(torch.tensor(rows, dtype=torch.float32))
    assert bool(torch.isfinite(probabilities).all())
    assert bool((probabilities >= 0).all())
    assert torch.allclose(probabilities.sum(dim=-1), torch.ones(len(rows)))


def test_infinite_logits_are_sampled_among_themselves():
    logits = torch.tensor([[0.0, math.inf, 1.0, math.inf]])
    sampler = Sampler(0, torch.device("cpu"))
    drawn = {sampler(logits, [1.0])[0] for _ in range(50)}
    assert drawn == {1, 3}


def test_top_k_keeps_the_k_largest():
    logits = torch.tensor([[5.0, 4.0, 3.0, -1.0, 2.0]])
    sampler = Sampler(0, torch.device("cpu"))
    assert {sampler(logits, [100.0], [2])[0] for _ in range(80)} == {0, 1}
    assert {sampler(logits, [100.0], [10**9])[0] for _ in range(200)} == set(range(5))


def test_a_tiny_temperature_through_the_engine_is_greedy():
    engine = Engine(EngineConfig(model="tiny"))
    greedy = engine.generate([list(range(1, 30))], 8, ignore_eos=True)[0].output_token_ids
    request_id = engine.add_request(list(range(1, 30)), 8, temperature=1e-40, ignore_eos=True)
    engine.run_until_done()
    assert engine.sequences[request_id].output_token_ids == greedy
    assert engine.sequences[request_id].error is None
    engine.check_integrity()


def poison_the_model(engine: Engine, poison: int = POISON) -> list[int]:
    """Make the model's forward pass raise whenever its batch holds the `poison` token (a
    fault in one request's data); returns a list that counts the failures."""
    model = engine.runner.model
    original = model.forward
    failures: list[int] = []

    def forward(input_ids, positions, output_rows=None):
        if bool((input_ids == poison).any()):
            failures.append(len(input_ids))
            raise RuntimeError("injected fault")
        return original(input_ids, positions, output_rows)

    model.forward = forward
    return failures


SHARED = list(range(1, 49))  # three full blocks of 16
PROMPTS = [[*SHARED, 60, 61], [*SHARED, 70, 71, 72], list(range(200, 237))]


def decode_poison(clean: Engine, expected: list[list[int]]) -> tuple[list[int], int]:
    """A prompt and a token: the token is the prompt's second greedy output and appears in
    no other prompt or output, so a batch fails on it only when that request decodes it."""
    others = {token for tokens in PROMPTS + expected for token in tokens}
    for start in range(300, 480):
        prompt = [start, start + 1, start + 2]
        outputs = clean.generate([prompt], 6, ignore_eos=True)[0].output_token_ids
        poison = outputs[1]
        if poison not in others and poison not in prompt and poison not in outputs[:1]:
            return prompt, poison
    raise AssertionError("no prompt decodes a token unique to it")


@pytest.mark.parametrize("poison_at", ["prefill", "decode"])
def test_a_failing_request_fails_alone(poison_at):
    clean = Engine(EngineConfig(model="tiny"))
    expected = [s.output_token_ids for s in clean.generate(PROMPTS, 6, ignore_eos=True)]
    if poison_at == "prefill":
        bad_prompt, poison = [POISON, *SHARED[1:], 80], POISON
    else:
        bad_prompt, poison = decode_poison(clean, expected)

    engine = Engine(EngineConfig(model="tiny"))
    failures = poison_the_model(engine, poison)
    ids = [engine.add_request(prompt, 6, ignore_eos=True) for prompt in PROMPTS[:2]]
    bad = engine.add_request(bad_prompt, 6, ignore_eos=True)
    ids.append(engine.add_request(PROMPTS[2], 6, ignore_eos=True))
    outputs = []
    while engine.has_unfinished_requests():
        outputs.extend(engine.step())
        engine.check_integrity()
    assert failures, "the fault never fired"
    errors = [output for output in outputs if output.error is not None]
    assert [output.request_id for output in errors] == [bad]
    assert engine.sequences[bad].is_finished and "injected fault" in engine.sequences[bad].error
    assert len(engine.sequences[bad].output_token_ids) == (0 if poison_at == "prefill" else 2)
    assert [engine.sequences[i].output_token_ids for i in ids] == expected
    assert all(engine.sequences[i].error is None for i in ids)
    # the pool is whole and what it caches is right: a prompt sharing the prefix hits it and
    # decodes exactly what a clean engine decodes
    pool = engine.kv_manager.block_pool
    assert all(block.ref_cnt == 0 for block in pool.blocks[1:])
    again = engine.add_request([*SHARED, 90], 6, ignore_eos=True)
    engine.run_until_done()
    reference = clean.generate([[*SHARED, 90]], 6, ignore_eos=True)[0]
    assert engine.sequences[again].output_token_ids == reference.output_token_ids
    assert engine.sequences[again].num_cached_tokens == 48
    engine.check_integrity()


def test_a_request_reading_blocks_a_failed_one_was_writing_is_recomputed():
    """Two prompts admitted in one step share a prefix the first one writes; the first fails,
    so the second (which hit on its blocks) is preempted and recomputed, not served from
    KV that was never written."""
    engine = Engine(EngineConfig(model="tiny"))
    clean = Engine(EngineConfig(model="tiny"))
    writer_prompt = [*SHARED, POISON]
    reader_prompt = [*SHARED, 33, 34]
    expected = clean.generate([reader_prompt], 4, ignore_eos=True)[0].output_token_ids
    poison_the_model(engine)
    writer = engine.add_request(writer_prompt, 4, ignore_eos=True)
    reader = engine.add_request(reader_prompt, 4, ignore_eos=True)
    engine.run_until_done()
    engine.check_integrity()
    assert engine.sequences[writer].error is not None
    assert engine.sequences[reader].error is None
    assert engine.sequences[reader].num_preemptions == 1
    assert engine.sequences[reader].output_token_ids == expected


@settings(max_examples=200, deadline=None)
@given(
    rows=st.lists(
        st.lists(st.sampled_from([0.0, 0.0, 1e-30, 1e-6, 0.3, 1.0]), min_size=1, max_size=12),
        min_size=1,
        max_size=4,
    ),
    seed=st.integers(0, 2**32 - 1),
)
def test_a_draw_never_picks_a_token_of_zero_probability(rows, seed):
    width = max(len(row) for row in rows)
    weights = torch.tensor([row + [0.0] * (width - len(row)) for row in rows])
    weights[weights.sum(dim=-1) == 0, 0] = 1.0
    probabilities = weights / weights.sum(dim=-1, keepdim=True)
    drawn = draw(probabilities, torch.Generator().manual_seed(seed))
    assert drawn.shape == (len(rows),)
    assert bool((probabilities.gather(1, drawn[:, None]) > 0).all())


def test_draws_follow_the_probabilities():
    probabilities = torch.tensor([[0.1, 0.0, 0.2, 0.7]]).repeat(4000, 1)
    drawn = draw(probabilities, torch.Generator().manual_seed(0))
    counts = torch.bincount(drawn, minlength=4).tolist()
    assert counts[1] == 0
    # 4000 draws: each count within 5 standard deviations of its expectation
    for count, p in zip(counts, [0.1, 0.0, 0.2, 0.7], strict=True):
        assert abs(count - 4000 * p) <= 5 * math.sqrt(4000 * p * (1 - p)) + 1e-9
