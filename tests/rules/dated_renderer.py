"""A chat layout that prints today's date in its system header, as Llama 3.2's template does.

The Hugging Face renderer runs such templates for real; this small layout over o200k_base keeps
the PC102 tests free of model downloads while exercising the same date dependence.
"""

from __future__ import annotations

from pcache.prompt.renderers.interface import RenderOptions
from pcache.prompt.renderers.plain import PlainRenderer
from pcache.prompt.renderers.rendered import Span
from pcache.prompt.shapes.request import Request


class DatedRenderer(PlainRenderer):
    def __init__(self) -> None:
        super().__init__("o200k_base")
        self.name = "test:dated-o200k"

    def render_text(self, request: Request, options: RenderOptions) -> tuple[str, list[Span]]:
        text, spans = super().render_text(request, options)
        header = (
            "<|im_start|>system\nCutting Knowledge Date: December 2023\n"
            f"Today Date: {options.date}<|im_end|>\n"
        )
        shifted = [Span(s.start + len(header), s.end + len(header), s.path) for s in spans]
        return header + text, shifted
