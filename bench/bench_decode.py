"""Decode-step time of the engine on the CPU: TPOT of a batch decoding together, and a profile.

A batch of `--batch` prompts (fresh random tokens, `--prompt-tokens` each) is prefilled, then
decoded for `--steps` steps; the script times every decode step (from the engine's `step()`
call to its return) after `--warmup` whole warm-up rounds, and prints the median step time
with its interquartile range and the load average before and after. `--profile` prints
torch.profiler's top operators (by self CPU time) and pyinstrument's call tree of the timed
steps instead of (and after) timing them.

Usage:
    python bench/bench_decode.py                             # preset tiny, batch 4
    python bench/bench_decode.py --model bench-llama --threads 2 --profile
    python bench/bench_decode.py --model DIR --json          # one JSON line
    python bench/bench_decode.py --model bench-llama --temperature 1   # sampled, as a client
                                                             # sending no temperature gets

`bench-llama` is a Llama of 4 layers, hidden 256, the Llama 3 vocabulary (128,256 tokens):
the shape `bench/vllm_side_by_side.sh` serves with seeded random weights;
`--write-model DIR --tokenizer-from FIXTURE_DIR` writes it (config.json, model.safetensors and
the fixture's tokenizer files) for vLLM and `pcache serve` to load.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

BENCH_LLAMA = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "vocab_size": 128256,
    "hidden_size": 256,
    "intermediate_size": 768,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "rms_norm_eps": 1e-5,
    "rope_theta": 500000.0,
    "max_position_embeddings": 4096,
    "tie_word_embeddings": False,
    "bos_token_id": 128000,
    "eos_token_id": 128001,
    "torch_dtype": "float32",
}


def model_directory(name: str) -> str:
    """`bench-llama` becomes a directory with its config.json (random weights); others pass."""
    if name != "bench-llama":
        return name
    directory = Path(os.environ.get("TMPDIR", "/tmp")) / "pcache-bench-llama"
    write_model(directory)
    return str(directory)


def write_model(directory: Path, tokenizer_from: Path | None = None) -> None:
    """bench-llama's config.json and seeded random weights (once), and a tokenizer's files."""
    import shutil

    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps(BENCH_LLAMA))
    if not (directory / "model.safetensors").exists():
        write_random_weights(directory)
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        if tokenizer_from is not None and (tokenizer_from / name).exists():
            shutil.copy(tokenizer_from / name, directory / name)


def write_random_weights(directory: Path) -> None:
    """model.safetensors with Hugging Face's names: the engine's seeded random init, unpacked."""
    import torch
    from safetensors.torch import save_file

    from pcache.engine.loader import build_model, checkpoint_tensors, random_init
    from pcache.engine.model_config import model_config_from_dict

    config = model_config_from_dict(BENCH_LLAMA, "bench-llama")
    model = build_model(config, torch.float32, torch.device("cpu"), 256)
    random_init(model, seed=0)
    save_file(checkpoint_tensors(model), str(directory / "model.safetensors"))


def decode_round(
    engine, prompts, steps: int, temperature: float = 0.0
) -> list[tuple[float, float]]:
    """Prefill every prompt, then time each decode step: (wall seconds, CPU seconds of this
    process; with one thread, the CPU time is what a busy machine does not inflate)."""
    ids = [
        engine.add_request(prompt, steps + 1, ignore_eos=True, temperature=temperature)
        for prompt in prompts
    ]
    while any(engine.sequences[i].first_token_time is None for i in ids):
        engine.step()
    times = []
    while engine.has_unfinished_requests():
        start, cpu_start = time.perf_counter(), time.process_time()
        engine.step()
        times.append((time.perf_counter() - start, time.process_time() - cpu_start))
    for request_id in ids:
        engine.release(request_id)
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--prompt-tokens", type=int, default=256)
    parser.add_argument("--steps", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument(
        "--temperature",
        type=float,
        default=0.0,
        help="0: greedy; 1.0: what a client that"
        " sends none gets from `pcache serve` (OpenAI's default)",
    )
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--write-model", type=Path, default=None)
    parser.add_argument("--tokenizer-from", type=Path, default=None)
    args = parser.parse_args()
    if args.write_model is not None:
        write_model(args.write_model, args.tokenizer_from)
        return 0

    import numpy as np
    import torch

    from pcache.engine.config import EngineConfig
    from pcache.engine.engine import Engine

    if args.threads:
        torch.set_num_threads(args.threads)
    engine = Engine(EngineConfig(model=model_directory(args.model), kv_cache_tokens=16384))
    vocab = engine.model_config.vocab_size
    generator = np.random.default_rng(0)

    def prompts():
        size = args.prompt_tokens
        return [generator.integers(0, vocab, size).tolist() for _ in range(args.batch)]

    for _ in range(args.warmup):
        decode_round(engine, prompts(), args.steps, args.temperature)
    load_before = os.getloadavg()[0]
    if args.profile:
        return profile(engine, prompts(), args.steps, args.temperature)
    times = []
    for _ in range(args.rounds):
        times.extend(decode_round(engine, prompts(), args.steps, args.temperature))
    load_after = os.getloadavg()[0]
    ms = sorted(1000 * wall for wall, _ in times)
    q1, median, q3 = statistics.quantiles(ms, n=4)
    cpu_q1, cpu_median, cpu_q3 = statistics.quantiles([1000 * cpu for _, cpu in times], n=4)
    result = {
        "model": args.model,
        "batch": args.batch,
        "threads": torch.get_num_threads(),
        "temperature": args.temperature,
        "steps": len(ms),
        "step_ms_p50": round(median, 3),
        "step_ms_iqr": [round(q1, 3), round(q3, 3)],
        "tokens_per_s": round(args.batch * 1000 / median, 1),
        "cpu_ms_p50": round(cpu_median, 3),
        "cpu_ms_iqr": [round(cpu_q1, 3), round(cpu_q3, 3)],
        "load_before": load_before,
        "load_after": load_after,
    }
    if args.json:
        print(json.dumps(result))
    else:
        print(
            f"{args.model} batch {args.batch}, {result['threads']} threads: decode step p50"
            f" {median:.3f} ms (IQR {q1:.3f}-{q3:.3f}) over {len(ms)} steps,"
            f" {result['tokens_per_s']} tokens/s; CPU time p50 {cpu_median:.3f} ms"
            f" (IQR {cpu_q1:.3f}-{cpu_q3:.3f}); load {load_before:.2f} -> {load_after:.2f}"
        )
    return 0


def profile(engine, prompts, steps: int, temperature: float = 0.0) -> int:
    import torch
    from pyinstrument import Profiler

    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as recorded:
        decode_round(engine, prompts, steps, temperature)
    print(recorded.key_averages().table(sort_by="self_cpu_time_total", row_limit=20))
    profiler = Profiler(interval=0.0002)
    profiler.start()
    decode_round(engine, prompts, steps, temperature)
    profiler.stop()
    print(profiler.output_text(unicode=False, color=False, show_all=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
