"""GPU measurements (bf16): the Triton extend kernel against SDPA's flash backend, and the
full-prefill TTFT of a 4,096-token prompt on the llama3-8b shape against the roofline.

    python bench/bench_gpu.py            # both parts, about 2-4 minutes on an H200
    python bench/bench_gpu.py --kernel   # only the kernel comparison
    python bench/bench_gpu.py --ttft     # only the TTFT

Roofline (shared/research/engine_anchors.md section 5): llama3-8b, 4,096 new tokens = 61.6
TFLOP, 62.3 ms at 989 TFLOP/s (dense bf16 spec), 77.9 ms at 790 TFLOP/s (measured GEMM).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

ROOFLINE_MS = 62.3
LLAMA3_8B_PREFILL_TFLOP = 61.6
SHAPES = [(1, 1024), (1, 4096), (4, 2048)]  # (sequences, tokens per sequence), all new
HEADS, KV_HEADS, HEAD_DIM = 32, 8, 128


def cuda_median_ms(function, runs: int = 20, warmup: int = 3) -> float:
    for _ in range(warmup):
        function()
    torch.cuda.synchronize()
    times = []
    for _ in range(runs):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        function()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def attention_tflop(num_sequences: int, tokens: int) -> float:
    pairs = num_sequences * tokens * (tokens + 1) / 2
    return 4 * HEADS * HEAD_DIM * pairs / 1e12


def kernel_comparison() -> None:
    print("Triton paged extend kernel vs SDPA flash (contiguous K/V), causal, bf16")
    print(f"  heads {HEADS}/{KV_HEADS}, head_dim {HEAD_DIM}, block size 16")
    for num_sequences, tokens in SHAPES:
        compare_shape(num_sequences, tokens)


def compare_shape(num_sequences: int, tokens: int) -> None:
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.functional import scaled_dot_product_attention

    from pcache.kernels.paged_attention import paged_attention

    device, dtype, block_size = "cuda", torch.bfloat16, 16
    configs = [(64, 64, 4, 2), (128, 64, 8, 2), (128, 32, 8, 3), (64, 32, 4, 3)]
    total = num_sequences * tokens
    query = torch.randn(total, HEADS, HEAD_DIM, device=device, dtype=dtype)
    key = torch.randn(total, KV_HEADS, HEAD_DIM, device=device, dtype=dtype)
    value = torch.randn_like(key)
    blocks_per_seq = tokens // block_size
    num_blocks = num_sequences * blocks_per_seq + 1
    order = torch.randperm(num_blocks - 1, device=device) + 1  # scattered pages
    block_table = order.view(num_sequences, blocks_per_seq).to(torch.int32)
    k_cache = torch.empty(num_blocks, block_size, KV_HEADS, HEAD_DIM, device=device, dtype=dtype)
    v_cache = torch.empty_like(k_cache)
    k_cache[block_table.long()] = key.view(
        num_sequences, blocks_per_seq, block_size, KV_HEADS, HEAD_DIM
    )
    v_cache[block_table.long()] = value.view(
        num_sequences, blocks_per_seq, block_size, KV_HEADS, HEAD_DIM
    )
    cu_seqlens = torch.arange(0, total + 1, tokens, device=device, dtype=torch.int32)
    seq_lens = torch.full((num_sequences,), tokens, device=device, dtype=torch.int32)
    scale = HEAD_DIM**-0.5

    q4 = query.view(num_sequences, tokens, HEADS, HEAD_DIM).transpose(1, 2).contiguous()
    k4 = key.view(num_sequences, tokens, KV_HEADS, HEAD_DIM).transpose(1, 2)
    v4 = value.view(num_sequences, tokens, KV_HEADS, HEAD_DIM).transpose(1, 2)
    group = HEADS // KV_HEADS
    k4 = k4.repeat_interleave(group, dim=1).contiguous()
    v4 = v4.repeat_interleave(group, dim=1).contiguous()

    def flash():
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            return scaled_dot_product_attention(q4, k4, v4, is_causal=True, scale=scale)

    flash_ms = cuda_median_ms(flash)
    expected = flash().transpose(1, 2).reshape(total, HEADS, HEAD_DIM).float()
    best = None
    for block_m, tile_n, warps, stages in configs:

        def triton_kernel(block_m=block_m, tile_n=tile_n, warps=warps, stages=stages):
            return paged_attention(
                query,
                k_cache,
                v_cache,
                cu_seqlens,
                seq_lens,
                block_table,
                tokens,
                scale,
                block_m=block_m,
                tile_n=tile_n,
                num_warps=warps,
                num_stages=stages,
            )

        try:  # a tile config the chip cannot hold (shared memory) must not end the run
            error = (triton_kernel().float() - expected).abs().max().item()
            milliseconds = cuda_median_ms(triton_kernel)
        except Exception as exc:  # triton raises several kinds here
            config = (block_m, tile_n, warps, stages)
            print(f"  {num_sequences}x{tokens:<5} config {config}: {type(exc).__name__}: {exc}")
            continue
        print(
            f"  {num_sequences}x{tokens:<5} BLOCK_M {block_m:>3} TILE_N {tile_n:>3}"
            f" warps {warps} stages {stages}: {milliseconds:7.3f} ms"
            f" (max abs err vs flash {error:.1e})"
        )
        if best is None or milliseconds < best[0]:
            best = (milliseconds, block_m, tile_n, warps, stages)
    tflop = attention_tflop(num_sequences, tokens)
    if best is None:
        print(f"  {num_sequences}x{tokens}: flash {flash_ms:.3f} ms; no Triton config ran")
        return
    print(
        f"  {num_sequences}x{tokens}: flash {flash_ms:.3f} ms ({tflop / flash_ms * 1e3:.0f}"
        f" TFLOP/s), triton best {best[0]:.3f} ms ({tflop / best[0] * 1e3:.0f} TFLOP/s)"
        f" {best[1:]} -> {flash_ms / best[0]:.2f} of flash (target >= 0.70)"
    )


def ttft() -> None:
    from pcache.engine.config import EngineConfig
    from pcache.engine.engine import Engine

    tokens = 4096
    engine = Engine(
        EngineConfig(
            model="llama3-8b",
            device="cuda",
            dtype="bfloat16",
            attention_backend="triton",
            kv_cache_tokens=2 * tokens + 256,
            max_num_batched_tokens=tokens,
            enable_prefix_caching=True,
        )
    )
    generator = torch.Generator().manual_seed(0)

    def prompt():
        return torch.randint(0, 128256, (tokens,), generator=generator).tolist()

    def measure(token_ids) -> tuple[float, int]:
        request_id = engine.add_request(token_ids, 1, ignore_eos=True)
        engine.run_until_done()
        sequence = engine.sequences[request_id]
        return 1000 * (
            sequence.first_token_time - sequence.arrival_time
        ), sequence.num_cached_tokens

    for _ in range(2):  # warm-up: Triton compilation, allocator
        measure(prompt())
    cold = [measure(prompt())[0] for _ in range(5)]
    cold_ms = statistics.median(cold)
    print(f"llama3-8b shape, bf16, {tokens}-token prompt, full prefill (cold cache), median of 5")
    print(
        f"  TTFT {cold_ms:.1f} ms = {LLAMA3_8B_PREFILL_TFLOP / cold_ms * 1e3:.0f} TFLOP/s achieved;"
        f" roofline {ROOFLINE_MS} ms -> {cold_ms / ROOFLINE_MS:.2f}x of it (target <= 1.5x)"
    )
    base = prompt()
    measure(base)
    warm = [measure(base[:3072] + prompt()[:1024]) for _ in range(3)]
    warm_ms = statistics.median(ms for ms, _ in warm)
    print(
        f"  3072 cached + 1024 new: TTFT {warm_ms:.1f} ms (cached tokens {warm[0][1]});"
        f" roofline 16.4 ms -> {warm_ms / 16.4:.2f}x; gain over cold {cold_ms / warm_ms:.2f}x"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernel", action="store_true")
    parser.add_argument("--ttft", action="store_true")
    args = parser.parse_args()
    assert torch.cuda.is_available(), "needs a CUDA device"
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}")
    if args.kernel or not args.ttft:
        kernel_comparison()
    if args.ttft or not args.kernel:
        ttft()


if __name__ == "__main__":
    main()
