"""The Triton kernels against their torch twins: interpreter on the CPU (fp32), GPU in bf16."""

from __future__ import annotations

import os

import pytest

torch = pytest.importorskip("torch")

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")  # read at launch time; set before import
pytest.importorskip("triton", reason="triton is not installed (pip install 'pcache[gpu]')")

from pcache.kernels.paged_attention import paged_attention  # noqa: E402
from pcache.kernels.reference import paged_attention_reference, store_kv_reference  # noqa: E402
from pcache.kernels.store_kv import store_kv  # noqa: E402

ON_GPU = torch.cuda.is_available()
gpu = pytest.mark.gpu

# (new query tokens, cached context) per sequence
PREFILL = [(9, 0), (33, 0), (1, 0)]
EXTEND = [(5, 16), (20, 37), (3, 61)]
DECODE = [(1, 1), (1, 17), (1, 64), (1, 40)]
RAGGED = [(17, 0), (1, 30), (6, 10), (1, 0), (40, 24)]


def build_case(shape, block_size, num_kv_heads, group, head_dim, dtype, device, seed=0):
    """Random caches with scattered blocks, filled for the cached part; new q/k/v."""
    generator = torch.Generator().manual_seed(seed)

    def randn(*size):
        return torch.randn(*size, generator=generator).to(dtype=dtype, device=device)

    num_heads = num_kv_heads * group
    blocks_per_seq = [-(-(q + c) // block_size) for q, c in shape]
    num_blocks = sum(blocks_per_seq) + 3
    order = (torch.randperm(num_blocks - 1, generator=generator) + 1).tolist()
    table = torch.zeros(len(shape), max(blocks_per_seq), dtype=torch.int32)
    k_cache = randn(num_blocks, block_size, num_kv_heads, head_dim)
    v_cache = randn(num_blocks, block_size, num_kv_heads, head_dim)
    slots = []
    for index, ((query_len, context_len), count) in enumerate(
        zip(shape, blocks_per_seq, strict=True)
    ):
        ids = [order.pop() for _ in range(count)]
        table[index, :count] = torch.tensor(ids, dtype=torch.int32)
        slots += [
            ids[p // block_size] * block_size + p % block_size
            for p in range(context_len, context_len + query_len)
        ]
    num_tokens = sum(q for q, _ in shape)
    query = randn(num_tokens, num_heads, head_dim)
    key, value = (
        randn(num_tokens, num_kv_heads, head_dim),
        randn(num_tokens, num_kv_heads, head_dim),
    )
    cu = [0]
    for query_len, _ in shape:
        cu.append(cu[-1] + query_len)
    return {
        "query": query,
        "key": key,
        "value": value,
        "k_cache": k_cache,
        "v_cache": v_cache,
        "slot_mapping": torch.tensor(slots, dtype=torch.int64, device=device),
        "cu_seqlens_q": torch.tensor(cu, dtype=torch.int32, device=device),
        "seq_lens": torch.tensor([q + c for q, c in shape], dtype=torch.int32, device=device),
        "block_table": table.to(device),
        "query_lens": [q for q, _ in shape],
        "seq_lens_list": [q + c for q, c in shape],
    }


def run_both(case, scale):
    k_ref, v_ref = case["k_cache"].clone(), case["v_cache"].clone()
    store_kv_reference(case["key"], case["value"], k_ref, v_ref, case["slot_mapping"])
    store_kv(case["key"], case["value"], case["k_cache"], case["v_cache"], case["slot_mapping"])
    assert torch.equal(case["k_cache"], k_ref) and torch.equal(case["v_cache"], v_ref)
    expected = paged_attention_reference(
        case["query"].float(),
        k_ref.float(),
        v_ref.float(),
        case["query_lens"],
        case["seq_lens_list"],
        case["block_table"],
        scale,
    )
    produced = paged_attention(
        case["query"],
        case["k_cache"],
        case["v_cache"],
        case["cu_seqlens_q"],
        case["seq_lens"],
        case["block_table"],
        max(case["query_lens"]),
        scale,
    )
    return produced.float(), expected


SHAPES = {"prefill": PREFILL, "extend": EXTEND, "decode": DECODE, "ragged": RAGGED}


@pytest.mark.parametrize("block_size", [16, 32])
@pytest.mark.parametrize("group", [1, 4, 8])
@pytest.mark.parametrize("phase", list(SHAPES))
def test_paged_attention_matches_torch_fp32(phase, group, block_size):
    device = "cuda" if ON_GPU else "cpu"
    case = build_case(
        SHAPES[phase], block_size, 1 if group > 1 else 2, group, 16, torch.float32, device
    )
    produced, expected = run_both(case, 16**-0.5)
    torch.testing.assert_close(produced, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("block_size", [1, 4, 64])
def test_other_power_of_two_block_sizes(block_size):
    device = "cuda" if ON_GPU else "cpu"
    case = build_case(RAGGED[:3], block_size, 2, 2, 32, torch.float32, device)
    produced, expected = run_both(case, 32**-0.5)
    torch.testing.assert_close(produced, expected, rtol=1e-5, atol=1e-5)


def test_store_skips_padding_slots():
    device = "cuda" if ON_GPU else "cpu"
    case = build_case([(4, 0)], 16, 2, 1, 16, torch.float32, device)
    before = case["k_cache"].clone()
    slot_mapping = torch.full_like(case["slot_mapping"], -1)
    store_kv(case["key"], case["value"], case["k_cache"], case["v_cache"], slot_mapping)
    assert torch.equal(case["k_cache"], before)


@gpu
@pytest.mark.skipif(not ON_GPU, reason="needs a CUDA device")
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("group", [1, 4, 8])
@pytest.mark.parametrize("phase", list(SHAPES))
def test_paged_attention_matches_torch_on_gpu(phase, group, dtype):
    case = build_case([(q * 8, c * 8) for q, c in SHAPES[phase]], 16, 8, group, 128, dtype, "cuda")
    produced, expected = run_both(case, 128**-0.5)
    torch.testing.assert_close(produced, expected, rtol=2e-2, atol=2e-2)


def test_engine_on_triton_backend_matches_torch_backend():
    from pcache.engine.config import EngineConfig
    from pcache.engine.engine import Engine

    device = "cuda" if ON_GPU else "cpu"
    prompts = [list(range(3, 40)), list(range(3, 30)), [7, 8, 9]]
    results = []
    for backend in ("torch", "triton"):
        engine = Engine(
            EngineConfig(
                model="tiny-llama",
                device=device,
                dtype="float32",
                attention_backend=backend,
                kv_cache_tokens=512,
                record_logits=True,
            )
        )
        sequences = engine.generate(prompts, 4, ignore_eos=True)
        assert [s.num_cached_tokens for s in sequences] == [0, 16, 0]
        results.append(sequences)
    for torch_sequence, triton_sequence in zip(*results, strict=True):
        assert torch_sequence.output_token_ids == triton_sequence.output_token_ids
        torch.testing.assert_close(
            torch.stack(triton_sequence.logits),
            torch.stack(torch_sequence.logits),
            rtol=1e-5,
            atol=1e-5,
        )
