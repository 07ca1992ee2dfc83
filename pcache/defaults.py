"""The defaults and bounds that several commands share, each written once.

A leaf module (it imports nothing), so `pcache --help` reads the defaults it shows without
loading the code that uses them; the core modules import them from here too.
"""

from __future__ import annotations

DEFAULT_TOKENIZER = "gpt-oss"
"""The embedded default: the gpt-oss (harmony) chat format with tiktoken's o200k_harmony."""
DEFAULT_BLOCK_SIZE = 16
"""Tokens per KV block (vLLM's default)."""
MAX_BLOCK_SIZE = 1 << 20
"""Larger than any context window: a bigger block is a typo, and cost tables would allocate it."""
MAX_JOBS = 1024
"""More tokenizing threads than any machine has cores: a bigger `--jobs` is a typo."""
DEFAULT_HASH_ALGO = "pcache"
DEFAULT_DATE = "2026-01-01"
"""The date written by templates that print one (`--date`); fixed so renders are reproducible."""
DEFAULT_MODEL = "llama3-8b"
"""The model whose KV size prices a simulated replay or a report when none is named."""
PROFILE_NAMES = ("vllm", "sglang", "openai", "anthropic", "gemini", "deepseek", "bedrock")
"""The caches lint, diff and the report price findings for (`--profile`): every profile of
`pcache/data/providers.json`, in its order (tests/test_provider_profiles.py checks it)."""
DEFAULT_PROFILE = "vllm"
DEFAULT_REQUEST_TIMEOUT_S = 600.0
"""The deadline of one whole request of `replay --endpoint` (`--request-timeout`)."""
EXECUTORS = ("local", "ray")
"""Where the render/tokenize/hash stage and per-replica simulations run (`--executor`): in this
process (threads, `--jobs`), or as Ray tasks (the `pcache[ray]` extra)."""
DEFAULT_EXECUTOR = "local"
DEFAULT_ROUTER = "round-robin"
"""The router of `--replicas` when `--router` is not given."""
DEFAULT_CHARS_PER_TOKEN = 4
"""Characters per token of the routers' text view of hash-id traces (`replay --replicas`):
GIE's `averageCharactersPerToken`."""
GREEDY_BELOW = 1e-5
"""Temperatures below this sample greedily (vLLM's `_SAMPLING_EPS`): dividing float32 logits
by 1e-40 would make them infinite."""
