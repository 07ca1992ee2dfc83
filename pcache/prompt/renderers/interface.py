"""The renderer interface every tokenizer family implements, the optional abilities some
have, and the options they share.

`Renderer` is what every renderer can do. The abilities some renderers add to it are stated
as runtime-checkable protocols (each names only what it adds, so checking one is cheap), and
code asks `isinstance(renderer, SegmentRenderer)` instead of probing for methods:
`DeferredRenderer` (spans located only when asked for), `SegmentRenderer` (pieces between
special tokens encoded once: `pcache.prompt.tokenizers.segment_cache`), `PieceRenderer` (its
own way of cutting text into pieces), `TiktokenRenderer` (over a tiktoken encoding),
`MarkedRenderer` (knows which special-token markers it wrote), `TemplateRenderer` (chat
templates as text) and `WrappingRenderer` (delegates to an inner renderer).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from pcache.defaults import DEFAULT_DATE
from pcache.prompt.renderers.provenance import DeferredSpans
from pcache.prompt.renderers.rendered import Span
from pcache.prompt.shapes.request import Request
from pcache.prompt.tokenizers.pieces import Parts, PieceEncoder


@dataclass(frozen=True, slots=True)
class RenderOptions:
    """Settings that change the rendered text."""

    date: str = DEFAULT_DATE
    add_generation_prompt: bool = True
    template_kwargs: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class Renderer(Protocol):
    """Turns a chat request into text (with provenance) and text into token ids."""

    name: str
    """Identity of tokenizer + template, bound into pcache's hash namespace."""
    template_digest: str

    def render_text(self, request: Request, options: RenderOptions) -> tuple[str, list[Span]]:
        """The chat template applied to the request: text and source-path spans."""
        ...

    def encode(self, text: str) -> list[int]:
        """Token ids of rendered text (special tokens in the text are recognized)."""
        ...

    def encode_with_starts(self, text: str) -> tuple[list[int], list[int]]:
        """Token ids and the index of each token's first character."""
        ...

    def decode(self, token_ids: list[int]) -> str: ...


@runtime_checkable
class DeferredRenderer(Protocol):
    """Renders the text now and locates its source spans only when they are asked for."""

    def render_text_deferred(
        self, request: Request, options: RenderOptions
    ) -> tuple[str, DeferredSpans]: ...


@runtime_checkable
class SegmentRenderer(DeferredRenderer, Protocol):
    """Encodes rendered text piece by piece (cut at special tokens), each distinct piece once,
    and finds token starts from the pieces (`SegmentCachedRenderer`)."""

    def encode_segments(self, text: str) -> tuple[list[int], Parts | None]:
        """The token ids, and the pieces they came from (None: the text was not cut)."""
        ...

    def starts(self, text: str, parts: Parts | None) -> list[int]:
        """Each token's first character, for ids from `encode_segments(text)`."""
        ...

    def token_of_char(self, text: str, parts: Parts | None, char: int) -> int:
        """The token that holds character `char`."""
        ...


@runtime_checkable
class PieceRenderer(Protocol):
    """Knows how its tokenizer cuts text into pieces that encode apart (Hugging Face)."""

    def piece_encoder(self) -> PieceEncoder | None: ...


@runtime_checkable
class TiktokenRenderer(Protocol):
    """Encodes with a tiktoken encoding (harmony, the plain layouts)."""

    encoding: Any


@runtime_checkable
class MarkedRenderer(Protocol):
    """Knows where the special-token markers it wrote are (request text that looks like one
    stays ordinary text)."""

    def special_spans(self, text: str) -> list[tuple[int, int]] | None: ...


@runtime_checkable
class TemplateRenderer(Protocol):
    """Renders with chat templates given as text (Hugging Face models)."""

    templates: dict[str, str]


@runtime_checkable
class WrappingRenderer(Protocol):
    """Delegates to another renderer (`inner`), adding a cache or a view of it."""

    inner: Renderer
