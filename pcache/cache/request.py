"""`CacheRequest`: what the KV cache manager needs to know about one request.

Mirrors the fields of vLLM 0.33's `Request` that prefix caching reads: `request_id`,
`all_token_ids` (prompt + output), `num_tokens`, `num_computed_tokens`, `block_hashes`
(chained hashes of the full blocks, extended as output tokens are appended), `cache_salt` and
`skip_reading_prefix_cache`.

`CacheRequest.from_tokens(...)` hashes real token ids through `pcache.cache.hashing.block_hashes`
(hash-id traces, whose tokens are unknown, go to the pool directly: `VllmPolicy`).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, replace

from pcache.cache.hashing import HashSettings, block_hashes


@dataclass(slots=True, eq=False)
class CacheRequest:
    """A request as the KV cache manager sees it."""

    request_id: str
    num_prompt_tokens: int
    block_hashes: list[Hashable]
    all_token_ids: list[int] | None = None
    hash_settings: HashSettings | None = None
    num_computed_tokens: int = 0
    cache_salt: str | None = None
    skip_reading_prefix_cache: bool = False
    num_output_tokens: int = 0

    @classmethod
    def from_tokens(
        cls,
        request_id: str,
        prompt_token_ids: Sequence[int],
        settings: HashSettings,
        *,
        cache_salt: str | None = None,
        skip_reading_prefix_cache: bool = False,
    ) -> CacheRequest:
        if cache_salt is not None:
            settings = replace(settings, cache_salt=cache_salt)
        tokens = list(prompt_token_ids)
        request = cls(
            request_id=request_id,
            num_prompt_tokens=len(tokens),
            block_hashes=[],
            all_token_ids=tokens,
            hash_settings=settings,
            cache_salt=settings.cache_salt,
            skip_reading_prefix_cache=skip_reading_prefix_cache,
        )
        request.update_block_hashes()
        return request

    @property
    def num_tokens(self) -> int:
        return self.num_prompt_tokens + self.num_output_tokens

    def append_output_token_ids(self, token_ids: int | Sequence[int]) -> None:
        """Add generated tokens; blocks they fill get their hashes now."""
        assert self.all_token_ids is not None, "a hash-id request has no tokens to extend"
        new = [token_ids] if isinstance(token_ids, int) else list(token_ids)
        self.all_token_ids.extend(new)
        self.num_output_tokens += len(new)
        self.update_block_hashes()

    def update_block_hashes(self) -> None:
        assert self.hash_settings is not None and self.all_token_ids is not None
        size = self.hash_settings.block_size
        start = len(self.block_hashes) * size
        if start + size > len(self.all_token_ids):
            return
        parent = self.block_hashes[-1] if self.block_hashes else None
        self.block_hashes.extend(
            block_hashes(
                self.all_token_ids[start:],
                self.hash_settings,
                parent=parent,
                start_block=len(self.block_hashes),
            )
        )

    def block_tokens(self, index: int, block_size: int) -> tuple[int, ...]:
        assert self.all_token_ids is not None
        return tuple(self.all_token_ids[index * block_size : (index + 1) * block_size])
