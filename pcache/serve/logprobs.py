"""Token logprobs in the two OpenAI shapes: the legacy completions object (`tokens`,
`token_logprobs`, `top_logprobs`, `text_offset`) and chat's `content` list (`token`,
`logprob`, `bytes`, `top_logprobs`).

As in vLLM, a completions position's `top_logprobs` holds the requested alternatives and the
sampled token (so up to `logprobs + 1` entries); chat's holds exactly `top_logprobs`.
"""

from __future__ import annotations

from typing import Any

from pcache.serve.sampler_guard import TokenLogprobs


class LogprobsWriter:
    """Writes the logprobs of one answer, piece by piece (a stream's chunks or the whole)."""

    def __init__(self, codec: Any, chat: bool, text_offset: int = 0) -> None:
        self.token_text = codec.token_text
        self.token_bytes = codec.token_bytes
        self.chat = chat
        self.text_offset = text_offset

    def write(self, entries: list[tuple[int, TokenLogprobs]]) -> dict[str, Any]:
        return self._chat(entries) if self.chat else self._completions(entries)

    def _chat(self, entries: list[tuple[int, TokenLogprobs]]) -> dict[str, Any]:
        def item(token_id: int, logprob: float) -> dict[str, Any]:
            text = self.token_text(token_id)
            return {"token": text, "logprob": logprob, "bytes": self.token_bytes(token_id)}

        content = [
            {
                **item(token_id, entry.logprob),
                "top_logprobs": [item(other, value) for other, value in entry.top],
            }
            for token_id, entry in entries
        ]
        return {"content": content}

    def _completions(self, entries: list[tuple[int, TokenLogprobs]]) -> dict[str, Any]:
        tokens, token_logprobs, top_logprobs, offsets = [], [], [], []
        for token_id, entry in entries:
            text = self.token_text(token_id)
            tokens.append(text)
            token_logprobs.append(entry.logprob)
            alternatives = {self.token_text(other): value for other, value in entry.top}
            alternatives.setdefault(text, entry.logprob)
            top_logprobs.append(alternatives)
            offsets.append(self.text_offset)
            self.text_offset += len(text)
        return {
            "tokens": tokens,
            "token_logprobs": token_logprobs,
            "top_logprobs": top_logprobs,
            "text_offset": offsets,
        }
