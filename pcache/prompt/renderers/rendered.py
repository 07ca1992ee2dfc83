"""A rendered, tokenized prompt that remembers where every character came from."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable
from dataclasses import dataclass, field

from pcache.prompt.shapes.request import Request


@dataclass(frozen=True, slots=True)
class Span:
    """Characters [start, end) of the rendered text come from `path` of the request's JSON."""

    start: int
    end: int
    path: str
    normalized: str = ""
    """The path in pcache's normalized request (equal to `path` for plain OpenAI bodies)."""


@dataclass(slots=True)
class RenderedPrompt:
    """Rendered text, its token ids, each token's first character, and the text's provenance.

    `spans` are sorted and disjoint; characters outside every span were written by the template.
    For `{"token_ids": [...]}` inputs the text is empty and token i comes from `token_ids[i]`.
    """

    request: Request
    text: str
    token_ids: list[int]
    token_starts: list[int]
    spans: list[Span]
    renderer: str
    template_digest: str = ""
    _span_starts: list[int] = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        assert len(self.token_starts) == len(self.token_ids)
        self._span_starts = [span.start for span in self.spans]

    @property
    def num_tokens(self) -> int:
        return len(self.token_ids)

    def span_at(self, char: int) -> Span | None:
        index = bisect_right(self._span_starts, char) - 1
        if index >= 0 and self.spans[index].start <= char < self.spans[index].end:
            return self.spans[index]
        return None

    def path_at(self, char: int) -> str | None:
        span = self.span_at(char)
        return span.path if span else None

    def token_char(self, token: int) -> int:
        """First character of token `token` (the text length past the last token)."""
        if token >= len(self.token_starts):
            return len(self.text)
        return self.token_starts[token]

    def token_path(self, token: int) -> str | None:
        if self.request.token_ids is not None:
            return f"token_ids[{token}]" if token < self.num_tokens else None
        return self.path_at(self.token_char(token))


def assemble(pieces: Iterable[tuple[str, str | None]], request: Request) -> tuple[str, list[Span]]:
    """Concatenate (text, normalized path or None) pieces into text plus source-path spans."""
    parts: list[str] = []
    spans: list[Span] = []
    offset = 0
    for text, path in pieces:
        if not text:
            continue
        if path is not None:
            source = request.source_path(path)
            if spans and spans[-1].normalized == path and spans[-1].end == offset:
                spans[-1] = Span(spans[-1].start, offset + len(text), source, path)
            else:
                spans.append(Span(offset, offset + len(text), source, path))
        parts.append(text)
        offset += len(text)
    return "".join(parts), spans
