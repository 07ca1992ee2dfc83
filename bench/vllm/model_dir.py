"""A small random-weight Llama directory that both vLLM and `pcache serve` load.

The shape is pcache's `tiny-llama` preset (2 layers, hidden size 64) with heads of 32 dimensions
(vLLM's CPU attention takes 32 and up: 2 query heads, 1 KV head), the Llama 3 vocabulary (128,256
ids, an output projection of its own), seeded random weights in float32 safetensors
written with Hugging Face's weight names, and the real Llama 3.2 tokenizer and chat template of
the test fixtures (`tests/fixtures/build_tokenizers.py`, built from pinned PyPI wheels; its
tokenizer puts `<|begin_of_text|>` before a text prompt, as Meta's does).

Usage: python bench/vllm/model_dir.py DIR   (run from the repository root; DIR is reused when
it is complete)
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOKENIZER_FIXTURE = "llama3.2"
MAX_POSITIONS = 4096
CONFIG_OVERRIDES = {
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "head_dim": 32,
    "vocab_size": 128256,
    "tie_word_embeddings": False,
    "max_position_embeddings": MAX_POSITIONS,
    "bos_token_id": 128000,
    "eos_token_id": 128009,
    "torch_dtype": "float32",
}
"""What the model directory changes in the `tiny-llama` preset's config.json."""
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")


def build_model_dir(target: Path) -> Path:
    """The model directory at `target` (built unless it already has weights)."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from tests.fixtures.build_tokenizers import build
    from tests.serve_helpers import write_random_checkpoint

    if (target / "model.safetensors").is_file():
        return target
    tokenizer_dir = build([TOKENIZER_FIXTURE])[TOKENIZER_FIXTURE]
    scratch = target.with_name(f".{target.name}.partial")
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    for name in TOKENIZER_FILES:
        shutil.copyfile(tokenizer_dir / name, scratch / name)
    write_random_checkpoint("tiny-llama", scratch, **CONFIG_OVERRIDES)
    generation = {"bos_token_id": 128000, "eos_token_id": 128009}
    (scratch / "generation_config.json").write_text(json.dumps(generation) + "\n")
    shutil.rmtree(target, ignore_errors=True)
    scratch.rename(target)
    return target


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python bench/vllm/model_dir.py DIR", file=sys.stderr)
        return 2
    print(build_model_dir(Path(argv[0]).resolve()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
