"""Prefill of one 512-token prompt on the qwen3-0.6b shape, fp32 on the CPU: pcache's engine
against transformers' forward on the same weights, side by side, median of several runs.

    python bench/bench_prefill_cpu.py [--tokens 512] [--runs 5] [--threads 2] [--layers N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def interleaved_times(contenders: dict, runs: int) -> dict[str, list[float]]:
    """Warm each contender once, then time them in turns (so load changes hit all alike)."""
    for function in contenders.values():
        function()
    times: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(runs):
        for name, function in contenders.items():
            start = time.perf_counter()
            function()
            times[name].append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=512)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--preset", default="qwen3-0.6b")
    parser.add_argument("--layers", type=int, default=None, help="fewer layers, same widths")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    from pcache.engine.config import EngineConfig
    from pcache.engine.engine import Engine
    from tests.engine_helpers import save_reference_checkpoint

    with tempfile.TemporaryDirectory() as directory:
        overrides = {} if args.layers is None else {"num_hidden_layers": args.layers}
        reference = save_reference_checkpoint(args.preset, Path(directory), **overrides)
        engine = Engine(
            EngineConfig(
                model=directory,
                kv_cache_tokens=args.tokens + 64,
                max_num_batched_tokens=args.tokens,
                enable_prefix_caching=False,
            )
        )
    prompt = torch.randint(0, reference.config.vocab_size, (args.tokens,)).tolist()
    input_ids = torch.tensor([prompt])

    def engine_prefill():
        engine.add_request(prompt, 1, ignore_eos=True)
        engine.step()
        assert not engine.has_unfinished_requests()

    def transformers_forward(**options):
        with torch.inference_mode():
            reference(input_ids, use_cache=False, **options)

    times = interleaved_times(
        {
            "pcache engine (logits of the last token)": engine_prefill,
            "transformers forward (logits of every token)": transformers_forward,
            "transformers forward, logits_to_keep=1": lambda: transformers_forward(
                logits_to_keep=1
            ),
        },
        args.runs,
    )
    layers = reference.config.num_hidden_layers
    engine_name = next(iter(times))
    engine_times = times[engine_name]
    print(
        f"{args.preset} shape ({layers} layers), {args.tokens}-token prefill, fp32,"
        f" {args.threads} threads, {args.runs} interleaved rounds (torch {torch.__version__})"
    )
    # on shared cores the best round is the least disturbed one: shown beside the median
    print(f"  {'':<46} {'median':>9} {'best':>9}    median of per-round ratios to the engine")
    for name, values in times.items():
        ratios = [value / engine for value, engine in zip(values, engine_times, strict=True)]
        print(
            f"  {name:<46} {statistics.median(values) * 1000:7.0f} ms"
            f" {min(values) * 1000:6.0f} ms    {statistics.median(ratios):5.2f}x"
        )


if __name__ == "__main__":
    main()
