"""tiktoken pieces encoded in one call (joined at a reserved special token) and ahead of their
requests (on a background thread): the ids of encoding each piece alone, of each request alone."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pcache.pipeline import RENDER_CHUNK, RenderStage, Settings
from pcache.prompt.renderers.render import prompt_token_ids, resolve_renderer
from pcache.prompt.shapes.request import request_from_document
from pcache.prompt.tokenizers.segment_cache import SegmentCachedRenderer, TiktokenPieces
from tests.test_render_stage import generated_log

SPELLED = ["<|reserved_201087|>", "<|endoftext|>", "<|end|>", "<|endofprompt|>", "\ud800"]
PIECES = st.lists(
    st.one_of(st.text(max_size=40), st.sampled_from([*SPELLED, "", " ", "\n\n", "  x  "])),
    max_size=12,
)


@pytest.mark.parametrize("name", ["gpt-oss", "o200k_base", "cl100k_base"])
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pieces=PIECES)
def test_a_batch_of_pieces_is_each_piece_encoded_alone(name: str, pieces: list[str]):
    encoder = TiktokenPieces(resolve_renderer(name))
    for threads in (1, 3):
        encoder.batch.threads = threads
        encoded = encoder.encode_pieces(pieces)
        assert [list(ids) for ids in encoded] == [list(encoder.batch.encode(p)) for p in pieces]
    ordinary = [p for p in pieces if "\ud800" not in p]
    expected = [resolve_renderer(name).encoding.encode_ordinary(p) for p in ordinary]
    assert [list(ids) for ids in encoder.encode_pieces(ordinary)] == expected


def _requests(log) -> list:
    return [
        request_from_document(json.loads(line), str(log), number)
        for number, line in enumerate(log.read_text().splitlines(), 1)
        if line.startswith('{"')
    ]


@pytest.mark.parametrize("max_cached_tokens", [3_000_000, 2_000])
def test_chunks_encoded_ahead_give_each_requests_own_ids(tmp_path, max_cached_tokens: int):
    """A chunk started while the one before is not finished yet (its pieces shared, pending or
    forgotten meanwhile by a small cache): every request still reads its own ids."""
    log = tmp_path / "log.jsonl"
    generated_log(log, requests=3 * RENDER_CHUNK)
    options = Settings().render_options()
    requests = [r for r in _requests(log) if any(m["role"] == "user" for m in r.messages)]
    renderer = SegmentCachedRenderer(resolve_renderer("gpt-oss"), max_cached_tokens)
    stage = RenderStage(renderer, options, jobs=2, ahead=True)
    assert stage.ahead
    chunks = [requests[start : start + RENDER_CHUNK] for start in range(0, len(requests), 50)]
    waiting = None
    try:
        for chunk in chunks:
            started = (chunk, stage.start(chunk))
            if waiting is not None:
                _check(renderer, stage, options, *waiting)
            waiting = started
        _check(renderer, stage, options, *waiting)
    finally:
        stage.close()
    renderer.check_integrity()
    assert renderer.misses > 0


def _check(renderer, stage, options, chunk, started) -> None:
    for request, text in zip(chunk, stage.finish(started), strict=True):
        alone = SegmentCachedRenderer(resolve_renderer("gpt-oss"))
        assert text is not None
        assert renderer.encode_segments(text[0])[0] == prompt_token_ids(request, alone, options)


def test_one_job_runs_nothing_ahead():
    renderer = SegmentCachedRenderer(resolve_renderer("gpt-oss"))
    assert not RenderStage(renderer, Settings().render_options(), jobs=1, ahead=True).ahead
