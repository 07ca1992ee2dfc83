"""Each renderer states its optional abilities through the protocols of
`pcache.prompt.renderers.interface`, which code checks with `isinstance` instead of probing."""

from __future__ import annotations

from pcache.prompt.renderers.interface import (
    DeferredRenderer,
    MarkedRenderer,
    PieceRenderer,
    Renderer,
    SegmentRenderer,
    TemplateRenderer,
    TiktokenRenderer,
    WrappingRenderer,
)
from pcache.prompt.renderers.render import resolve_renderer
from pcache.prompt.tokenizers.codec import ChatMLRenderer, ModelCodec
from pcache.prompt.tokenizers.segment_cache import SegmentCachedRenderer
from tests.fixtures import hf_model_dir

ABILITIES = (
    DeferredRenderer,
    SegmentRenderer,
    PieceRenderer,
    TiktokenRenderer,
    MarkedRenderer,
    TemplateRenderer,
    WrappingRenderer,
)


def abilities(renderer) -> set[type]:
    assert isinstance(renderer, Renderer)
    return {ability for ability in ABILITIES if isinstance(renderer, ability)}


def test_every_renderer_states_what_it_can_do():
    harmony = resolve_renderer("gpt-oss")
    plain = resolve_renderer("cl100k_base")
    hugging_face = resolve_renderer(str(hf_model_dir("qwen3")))
    assert abilities(harmony) == {TiktokenRenderer, MarkedRenderer}
    assert abilities(plain) == {TiktokenRenderer}
    assert abilities(hugging_face) == {DeferredRenderer, PieceRenderer, TemplateRenderer}
    assert abilities(SegmentCachedRenderer(harmony)) == {
        DeferredRenderer,
        SegmentRenderer,
        WrappingRenderer,
    }
    assert abilities(ChatMLRenderer(ModelCodec("tiny", 512))) == set()
