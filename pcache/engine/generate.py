"""`pcache generate`'s computation: prompts in, greedy token ids and cached tokens out."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pcache.defaults import DEFAULT_BLOCK_SIZE
from pcache.errors import EngineError, InputError


@dataclass(frozen=True, slots=True)
class GenerateResult:
    """What `pcache generate` computed, one entry per prompt in each list."""

    model: str
    engine: str
    prefix_cache: bool
    max_new_tokens: int
    prompt_tokens: list[int]
    cached_tokens: list[int]
    outputs: list[list[int]]
    texts: list[str] | None = None
    ttft_ms: list[float] = field(default_factory=list)


def load_prompt_ids(path: str) -> list[list[int]]:
    """A JSON list of token-id lists (a batch); anything else is an InputError naming the file."""
    from pcache.prompt.reading.loading import display_name, parse_json, read_bytes

    source = display_name(path)
    value: Any = parse_json(read_bytes(path), source)
    if not isinstance(value, list) or not value:
        raise InputError(source, "expected a non-empty JSON list of token-id lists")
    if all(isinstance(token, int) and not isinstance(token, bool) for token in value):
        value = [value]
    for index, prompt in enumerate(value):
        if not isinstance(prompt, list) or not prompt:
            raise InputError(source, f"prompt {index}: expected a non-empty list of token ids")
        for token in prompt:
            if not isinstance(token, int) or isinstance(token, bool) or token < 0:
                raise InputError(source, f"prompt {index}: token ids must be non-negative integers")
    return value


def _check_prompts(prompt_ids: list[list[int]], source: str, model: str, vocab: int) -> None:
    for index, prompt in enumerate(prompt_ids):
        for token in prompt:
            if not 0 <= token < vocab:
                raise InputError(
                    source,
                    f"prompt {index}: token id {token} is outside the vocabulary of {model}"
                    f" (0 to {vocab - 1})",
                )


def generate(
    model: str,
    prompt: str | None,
    prompt_ids: list[list[int]] | None,
    max_new_tokens: int,
    engine: str = "cpu",
    prefix_cache: bool = True,
    prompt_source: str = "--prompt-ids",
) -> GenerateResult:
    """Run the prompts as one batch through a fresh engine, greedy, to max_new_tokens.

    Every limit (vocabulary, positions, memory) is checked before anything big is allocated;
    `prompt_source` names where `prompt_ids` came from in messages.
    """
    from pcache.engine.config import EngineConfig, torch_device
    from pcache.engine.engine import Engine
    from pcache.engine.model_config import resolve_model_config
    from pcache.prompt.tokenizers.codec import ModelCodec, encode_text_prompt

    assert (prompt is None) != (prompt_ids is None)
    device = torch_device(engine)
    if max_new_tokens < 1:
        raise EngineError("--max-new-tokens must be at least 1")
    model_config, _ = resolve_model_config(model)
    codec = None
    if prompt is not None:
        codec = ModelCodec(model, model_config.vocab_size)
        prompt_ids = [encode_text_prompt(codec, prompt)]
        if not prompt_ids[0]:
            raise EngineError("--prompt encodes to no tokens")
    assert prompt_ids is not None
    _check_prompts(prompt_ids, prompt_source, model, model_config.vocab_size)
    longest = max(len(p) for p in prompt_ids) + max_new_tokens
    positions = model_config.max_position_embeddings
    if longest > positions:  # positions before memory: the model cannot hold the sequence
        raise EngineError(
            f"{longest - max_new_tokens} prompt tokens + {max_new_tokens} new tokens exceed"
            f" the {positions} positions of {model}"
        )
    block_size = DEFAULT_BLOCK_SIZE
    needed = sum(-(-(len(p) + max_new_tokens) // block_size) for p in prompt_ids) * block_size
    config = EngineConfig(
        model=model,
        device=device,
        block_size=block_size,
        kv_cache_tokens=needed,
        max_model_len=longest,
        enable_prefix_caching=prefix_cache,
    )
    runtime = Engine(config)
    sequences = runtime.generate(prompt_ids, max_new_tokens)
    return GenerateResult(
        model=model,
        engine=engine,
        prefix_cache=prefix_cache,
        max_new_tokens=max_new_tokens,
        prompt_tokens=[s.num_prompt_tokens for s in sequences],
        cached_tokens=[s.num_cached_tokens or 0 for s in sequences],
        outputs=[list(s.output_token_ids) for s in sequences],
        texts=None if codec is None else [codec.decode(s.output_token_ids) for s in sequences],
        ttft_ms=[1000 * (s.first_token_time - s.arrival_time) for s in sequences],
    )
