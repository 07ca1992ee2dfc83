"""`SmallTextEncoding` gives tiktoken's own ids, bytes and offsets, before and after it hands
over to tiktoken's encoding."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pcache.prompt.tokenizers import tiktoken_small
from pcache.prompt.tokenizers.tiktoken_offline import get_encoding
from pcache.prompt.tokenizers.tiktoken_small import RankSlots, SmallTextEncoding
from tests.conftest import SAMPLES

NAMES = ("o200k_harmony", "cl100k_base")
ALPHABET = st.sampled_from(
    [*"ab zZ\n\r\t'sdtl.,-_/:0123456789", "  ", "\u00e9", "\u0301", "\u4e2d", "\U0001f642"]
)
TEXTS = st.one_of(st.text(max_size=80), st.lists(ALPHABET, max_size=60).map("".join))


@pytest.fixture(scope="module")
def encodings():
    return {name: (SmallTextEncoding(name), get_encoding(name)) for name in NAMES}


@settings(max_examples=300, deadline=None)
@given(text=TEXTS)
def test_ids_equal_tiktoken(encodings, text):
    for small, full in encodings.values():
        ids = small.encode_ordinary(text)
        assert ids == full.encode_ordinary(text)
        assert small.encode(text, allowed_special="all") == full.encode(text, allowed_special="all")
        if ids and max(text, default="") < "\ud800":
            assert small.decode_tokens_bytes(ids) == full.decode_tokens_bytes(ids)
            assert small.decode(ids) == full.decode(ids)


def test_every_sample_text_and_its_offsets(encodings):
    texts = [path.read_text() for path in sorted(SAMPLES.rglob("*.json*"))]
    assert len(texts) > 5
    for small, full in encodings.values():
        for text in texts:
            ids = small.encode_ordinary(text)
            assert ids == full.encode_ordinary(text)
            assert small.decode_with_offsets(ids) == full.decode_with_offsets(ids)
        assert small._full is None, "small texts stay with the slot file"


def test_special_tokens_and_single_tokens(encodings):
    small, full = encodings["o200k_harmony"]
    text = "<|start|>user<|message|>hi<|end|>"
    assert small.encode(text, allowed_special="all") == full.encode(text, allowed_special="all")
    for token in ("<|start|>", "<|call|>", "hello", b" world"):
        assert small.encode_single_token(token) == full.encode_single_token(token)
    with pytest.raises(KeyError):
        small.encode_single_token("not one token")
    assert small.n_vocab == full.n_vocab


def test_hands_over_to_tiktoken_past_its_limits(monkeypatch):
    full = get_encoding("cl100k_base")
    small = SmallTextEncoding("cl100k_base")
    long_piece = "x" * (tiktoken_small.LONG_PIECE + 1)
    assert small.encode_ordinary(long_piece) == full.encode_ordinary(long_piece)
    assert small._full is not None
    monkeypatch.setattr(tiktoken_small, "SMALL_TEXT", 10)
    small = SmallTextEncoding("cl100k_base")
    for text in ("short one", "then a longer text past the limit", "and after"):
        assert small.encode_ordinary(text) == full.encode_ordinary(text)
    assert small._full is not None


def test_a_lone_surrogate_is_replaced_as_tiktoken_does():
    small, full = SmallTextEncoding("o200k_base"), get_encoding("o200k_base")
    assert small.encode_ordinary("a\ud800b") == full.encode_ordinary("a\ud800b")


def test_the_slot_file_is_rebuilt_when_it_does_not_read(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    first = tiktoken_small.rank_slots("cl100k_base")
    path = next((tmp_path / "pcache" / "tiktoken").glob("*.slots"))
    path.write_bytes(b"not a slot file")
    again = tiktoken_small.rank_slots("cl100k_base")
    assert isinstance(again, RankSlots)
    assert (
        again.get(b"hello")
        == first.get(b"hello")
        == get_encoding("cl100k_base").encode_single_token("hello")
    )
