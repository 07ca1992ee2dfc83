"""The engine's sampler as the server runs it: one row's failure is that row's, and logprobs.

`GuardedSampler` wraps the runner's sampler. A batch whose sampling raises (non-finite
probabilities, anything) is sampled again row by row, so the rows that still fail are known
and only their requests fail; the others keep the tokens they drew. When some request wants
logprobs, the raw logits' log-softmax (vLLM's default `raw_logprobs`: before temperature) gives
each row its sampled token's logprob and the top `top_logprobs` alternatives.

The rows are the sampling sequences of the step in batch order, which are the step outputs
that carry a token, in order: `EngineLoop` matches them and checks that the tokens agree. A
step whose forward pass the engine runs again one sequence at a time calls the sampler once
per sequence; the rows of those calls add up, in the same order.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

LOGPROB_FLOOR = -9999.0
"""What vLLM writes for a logprob of minus infinity (JSON has no infinities)."""


@dataclass(frozen=True, slots=True)
class TokenLogprobs:
    logprob: float
    top: tuple[tuple[int, float], ...]
    """The most likely tokens and their logprobs, most likely first."""


@dataclass(frozen=True, slots=True)
class SampledRow:
    token_id: int
    error: str | None = None
    logprobs: TokenLogprobs | None = None


class GuardedSampler:
    """Called by the runner as its own sampler: `(logits, temperatures, top_ks) -> token ids`
    (`top_ks`: None, or one k per row)."""

    def __init__(self, inner: Callable[..., list[int]]) -> None:
        self.inner = inner
        self.top_logprobs: int | None = None
        """Set by the engine thread before a step: the most alternatives any request of the
        step wants (0: the sampled token's logprob alone); None: nobody wants logprobs."""
        self.rows: list[SampledRow] = []

    def take(self) -> list[SampledRow]:
        """The rows of the calls since the last take (empty when the step sampled nothing)."""
        rows, self.rows = self.rows, []
        return rows

    def __call__(
        self, logits: Any, temperatures: list[float], top_ks: list[int] | None = None
    ) -> list[int]:
        errors: list[str | None] = [None] * len(temperatures)
        try:
            token_ids = [int(token) for token in self.inner(logits, temperatures, top_ks)]
        except Exception:
            token_ids = []
            for index, temperature in enumerate(temperatures):
                row_k = None if top_ks is None else top_ks[index : index + 1]
                try:
                    row = self.inner(logits[index : index + 1], [temperature], row_k)
                    token_ids.append(int(row[0]))
                except Exception as error:
                    token_ids.append(0)  # a placeholder: its request is failed after the step
                    errors[index] = f"sampling failed: {type(error).__name__}: {error}"
        assert len(token_ids) == len(temperatures), "the sampler must answer one token a row"
        logprobs = (
            [None] * len(token_ids)
            if self.top_logprobs is None
            else _logprobs(logits, token_ids, self.top_logprobs)
        )
        self.rows += [
            SampledRow(token, error, entry)
            for token, error, entry in zip(token_ids, errors, logprobs, strict=True)
        ]
        return token_ids


def _logprobs(logits: Any, token_ids: list[int], top: int) -> list[TokenLogprobs]:
    import torch

    with torch.inference_mode():
        logprobs = torch.log_softmax(logits.float(), dim=-1)
        logprobs = torch.nan_to_num(logprobs, nan=LOGPROB_FLOOR, neginf=LOGPROB_FLOOR)
        chosen = logprobs.gather(1, torch.tensor(token_ids, device=logprobs.device)[:, None])
        chosen_values = chosen.squeeze(1).tolist()
        if top > 0:
            values, indices = logprobs.topk(min(top, logprobs.shape[-1]), dim=-1)
            tops = [
                tuple(zip(row_indices, row_values, strict=True))
                for row_indices, row_values in zip(indices.tolist(), values.tolist(), strict=True)
            ]
        else:
            tops = [()] * len(token_ids)
    return [
        TokenLogprobs(value, alternatives)
        for value, alternatives in zip(chosen_values, tops, strict=True)
    ]
