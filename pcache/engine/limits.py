"""RequestLimits: what prompt an engine can run, checked without touching the engine.

The server checks a request against these before handing it to the engine's thread or
process, so a prompt too long or with ids outside the vocabulary is a 400 at once.
"""

from __future__ import annotations

from dataclasses import dataclass

from pcache.errors import EngineError


@dataclass(frozen=True, slots=True)
class RequestLimits:
    vocab_size: int
    max_model_len: int
    num_blocks: int
    block_size: int

    def check(self, token_ids: list[int], max_new_tokens: int) -> None:
        """Raise EngineError unless the engine can run this prompt."""
        if not token_ids:
            raise EngineError("a prompt needs at least one token")
        if min(token_ids) < 0 or max(token_ids) >= self.vocab_size:
            raise EngineError(f"token ids must be in [0, {self.vocab_size}) for this model")
        if max_new_tokens < 1:
            raise EngineError("max_new_tokens must be at least 1")
        total = len(token_ids) + max_new_tokens
        if total > self.max_model_len:
            raise EngineError(
                f"prompt of {len(token_ids)} tokens + {max_new_tokens} new tokens exceeds"
                f" the model's {self.max_model_len} positions"
            )
        capacity = (self.num_blocks - 1) * self.block_size
        if total > capacity:
            raise EngineError(
                f"too little memory for the KV cache: a request of {total} tokens needs more"
                f" than the {capacity} token slots it holds"
            )
