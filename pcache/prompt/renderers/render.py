"""One entry point from a request to a RenderedPrompt, and the `--tokenizer` registry."""

from __future__ import annotations

from functools import cache

from pcache.defaults import DEFAULT_TOKENIZER
from pcache.prompt.renderers.interface import DeferredRenderer, Renderer, RenderOptions
from pcache.prompt.renderers.rendered import RenderedPrompt, Span
from pcache.prompt.shapes.request import KIND_PROMPT, KIND_TOKEN_IDS, Request
from pcache.prompt.tokenizers.codec import encode_text_prompt, encode_text_prompt_with_starts
from pcache.prompt.tokenizers.tiktoken_offline import ENCODINGS


@cache
def resolve_renderer(name: str | None = None) -> Renderer:
    """`gpt-oss` (default), a bundled tiktoken encoding, a model preset (`tiny`,
    `qwen3-0.6b`, ...: what `pcache serve --model NAME` renders and encodes with), or a
    Hugging Face model dir or hub id."""
    name = name or DEFAULT_TOKENIZER
    if name in ("gpt-oss", "harmony"):
        from pcache.prompt.renderers.harmony import HarmonyRenderer

        return HarmonyRenderer()
    if name in ENCODINGS:
        from pcache.prompt.renderers.plain import PlainRenderer

        return PlainRenderer(name)
    preset = _preset_renderer(name)
    if preset is not None:
        return preset
    from pcache.prompt.renderers.hf_template import load_hf_renderer

    return load_hf_renderer(name)


def _preset_renderer(name: str) -> Renderer | None:
    """The chat renderer `pcache serve --model NAME` uses for a preset of the model table
    (`pcache.serve.text.TextCodec`: the ChatML layout over the preset's codec: cl100k for a
    vocabulary that large, else UTF-8 bytes); None when `name` is no preset, or a path."""
    from pathlib import Path

    from pcache.models import PRESETS, canonical_name

    canonical = canonical_name(name)
    if canonical is None or Path(name).exists():
        return None
    vocab_size = PRESETS[canonical].get("vocab_size")
    if vocab_size is None:
        from pcache.errors import TokenizerError

        raise TokenizerError(
            f"--tokenizer {name}: this preset sizes a simulated cache only (pcache serve does"
            " not run it), so it has no tokenizer; give its tokenizer instead (e.g. gpt-oss)"
        )
    from pcache.prompt.tokenizers.codec import ChatMLRenderer, ModelCodec

    return ChatMLRenderer(ModelCodec(canonical, vocab_size))


def encoder_path(renderer: Renderer) -> str:
    """Which library encodes the renderer's text, and why (`--verbose`)."""
    path = getattr(renderer, "encoder_path", None)
    if isinstance(path, str):
        return path
    encoding = getattr(renderer, "encoding", None)
    if encoding is not None:
        return f"tiktoken ({encoding.name})"
    return type(renderer).__name__


def render(
    request: Request, renderer: Renderer, options: RenderOptions | None = None
) -> RenderedPrompt:
    """Render (chat template), tokenize and attach provenance."""
    options = options or RenderOptions()
    if request.kind == KIND_TOKEN_IDS:
        assert request.token_ids is not None
        ids = list(request.token_ids)
        return RenderedPrompt(request, "", ids, [0] * len(ids), [], renderer.name)
    if request.kind == KIND_PROMPT:
        assert request.prompt is not None
        text, spans = request.prompt, [Span(0, len(request.prompt), request.source_path("prompt"))]
        token_ids, starts = encode_text_prompt_with_starts(renderer, text)
    else:
        text, spans = renderer.render_text(request, options)
        token_ids, starts = renderer.encode_with_starts(text)
    return RenderedPrompt(
        request, text, token_ids, starts, spans, renderer.name, renderer.template_digest
    )


def prompt_token_ids(
    request: Request, renderer: Renderer, options: RenderOptions | None = None
) -> list[int]:
    """The token ids `render` gives, without provenance or token starts (bulk paths, where a
    `SegmentCachedRenderer` encodes each repeated piece once)."""
    options = options or RenderOptions()
    if request.kind == KIND_TOKEN_IDS:
        assert request.token_ids is not None
        return list(request.token_ids)
    if request.kind == KIND_PROMPT:
        assert request.prompt is not None
        return encode_text_prompt(renderer, request.prompt)
    if isinstance(renderer, DeferredRenderer):
        text = renderer.render_text_deferred(request, options)[0]
    else:
        text = renderer.render_text(request, options)[0]
    return renderer.encode(text)
