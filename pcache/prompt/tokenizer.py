"""The renderer interface every tokenizer family implements, and the options they share."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from pcache.defaults import DEFAULT_DATE
from pcache.prompt.rendered import Span
from pcache.prompt.request import Request


@dataclass(frozen=True, slots=True)
class RenderOptions:
    """Settings that change the rendered text."""

    date: str = DEFAULT_DATE
    add_generation_prompt: bool = True
    template_kwargs: dict[str, Any] = field(default_factory=dict)


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
