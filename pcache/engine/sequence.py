"""Sequence: one request's tokens, progress, timestamps and outputs inside the engine."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from pcache.cache.request import CacheRequest


class SequenceStatus(enum.Enum):
    WAITING = "waiting"
    RUNNING = "running"
    FINISHED = "finished"


@dataclass(eq=False, slots=True)
class Sequence:
    """A request as the engine tracks it; the KV cache manager sees its `cache_request`."""

    cache_request: CacheRequest
    max_new_tokens: int
    temperature: float = 0.0
    top_k: int = 0
    ignore_eos: bool = False
    eos_token_ids: tuple[int, ...] = ()
    status: SequenceStatus = SequenceStatus.WAITING
    num_cached_tokens: int | None = None
    num_preemptions: int = 0
    aborted: bool = False
    error: str | None = None
    """Why the engine gave up on this request (its step failed); it is finished."""
    arrival_time: float = 0.0
    first_scheduled_time: float | None = None
    first_token_time: float | None = None
    finish_time: float | None = None
    output_token_ids: list[int] = field(default_factory=list)
    logits: list[Any] = field(default_factory=list)

    def __post_init__(self) -> None:
        assert self.max_new_tokens >= 1
        assert self.cache_request.num_prompt_tokens >= 1

    @property
    def request_id(self) -> str:
        return self.cache_request.request_id

    @property
    def token_ids(self) -> list[int]:
        assert self.cache_request.all_token_ids is not None
        return self.cache_request.all_token_ids

    @property
    def prompt_token_ids(self) -> list[int]:
        return self.token_ids[: self.num_prompt_tokens]

    @property
    def num_prompt_tokens(self) -> int:
        return self.cache_request.num_prompt_tokens

    @property
    def num_tokens(self) -> int:
        return self.cache_request.num_tokens

    @property
    def num_computed_tokens(self) -> int:
        return self.cache_request.num_computed_tokens

    @num_computed_tokens.setter
    def num_computed_tokens(self, value: int) -> None:
        assert 0 <= value <= self.num_tokens
        self.cache_request.num_computed_tokens = value

    @property
    def is_finished(self) -> bool:
        return self.status == SequenceStatus.FINISHED

    def append_token(self, token_id: int) -> None:
        self.output_token_ids.append(token_id)
        self.cache_request.append_output_token_ids(token_id)
        stop = not self.ignore_eos and token_id in self.eos_token_ids
        if stop or len(self.output_token_ids) >= self.max_new_tokens:
            self.status = SequenceStatus.FINISHED
