"""One request's answer as it grows: streamed text, stop strings and stop tokens, logprobs.

`Answer.push` turns each engine event into the piece a client gets next. When a stop string
or a `stop_token_ids` token ends the answer here, `ended_here` is set: the engine has not
finished the request, so the caller stops it (counted as a stop).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pcache.serve.engine_loop import TokenEvent, Usage
from pcache.serve.protocol import GenerationRequest
from pcache.serve.sampler_guard import TokenLogprobs
from pcache.serve.stops import StopMatcher


@dataclass(slots=True)
class Piece:
    text: str
    logprobs: list[tuple[int, TokenLogprobs]] = field(default_factory=list)
    finish_reason: str | None = None
    stop_reason: str | int | None = None
    usage: Usage | None = None


class Answer:
    def __init__(self, codec: Any, params: GenerationRequest) -> None:
        self.detokenizer = codec.detokenizer()
        self.matcher = StopMatcher(params.stop, params.include_stop_str_in_output)
        self.stop_token_ids = frozenset(params.stop_token_ids)
        self.include_stop = params.include_stop_str_in_output
        self.ended_here = False

    def push(self, event: TokenEvent) -> Piece:
        token = event.token_id
        if token is None:  # stopped without a token (the client left)
            return Piece("", [], event.finish_reason, None, event.usage)
        logprobs = [] if event.logprobs is None else [(token, event.logprobs)]
        stop_token = token in self.stop_token_ids
        final = event.finish_reason is not None or stop_token
        if stop_token and not self.include_stop:
            delta = self.detokenizer.flush()
        else:
            delta = self.detokenizer.push(token, final)
        text = self.matcher.push(delta)
        piece = Piece(text, logprobs, event.finish_reason, None, event.usage)
        if self.matcher.matched is not None:
            piece.finish_reason, piece.stop_reason = "stop", self.matcher.matched
            self.ended_here = event.finish_reason is None
        elif stop_token:
            piece.text += self.matcher.flush()
            piece.finish_reason, piece.stop_reason = "stop", token
            self.ended_here = event.finish_reason is None
        elif event.finish_reason is not None:
            piece.text += self.matcher.flush()
        return piece
