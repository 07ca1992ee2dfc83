"""Streamed detokenization: the deltas of any token sequence add up to its decoded text."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pcache.serve.text import ByteDetokenizer, Detokenizer, TextCodec


def streamed(detokenizer, token_ids: list[int]) -> list[str]:
    deltas = [detokenizer.push(token) for token in token_ids[:-1]]
    return [*deltas, detokenizer.push(token_ids[-1], final=True)]


@pytest.fixture(scope="module")
def qwen3_codec():
    from tests.fixtures import hf_model_dir

    return TextCodec(str(hf_model_dir("qwen3")), 151936)


@settings(max_examples=60, deadline=None)
@given(text=st.text(min_size=1, max_size=60))
def test_deltas_of_a_real_tokenizer_add_up_to_the_text(qwen3_codec, text):
    token_ids = qwen3_codec.encode(text)
    if not token_ids:
        return
    deltas = streamed(Detokenizer(qwen3_codec), token_ids)
    assert "".join(deltas) == qwen3_codec.decode(token_ids)
    assert all("\ufffd" not in delta for delta in deltas[:-1]) or "\ufffd" in text


@settings(max_examples=100, deadline=None)
@given(token_ids=st.lists(st.integers(0, 511), min_size=1, max_size=40))
def test_byte_level_ids_stream_as_utf8_and_placeholders(token_ids):
    deltas = streamed(ByteDetokenizer(), token_ids)
    data = b"".join(bytes((t,)) if t < 256 else f"<|{t}|>".encode() for t in token_ids)
    assert "".join(deltas) == data.decode("utf-8", errors="replace")


def test_a_multibyte_character_waits_for_its_last_byte():
    detokenizer = ByteDetokenizer()
    euro = "€".encode()
    assert [detokenizer.push(byte) for byte in euro] == ["", "", "€"]


@pytest.fixture(scope="module")
def llama_codec():
    from tests.fixtures import hf_model_dir

    return TextCodec(str(hf_model_dir("llama3.2")), 128256)


def test_text_is_encoded_through_the_tiktoken_path_where_the_tokenizer_allows(llama_codec):
    assert llama_codec.encoder is llama_codec.renderer
    assert llama_codec.prompt_tokens.prefix == (128000,)  # BOS, as the post-processor adds it


@settings(max_examples=80, deadline=None)
@given(
    text=st.lists(
        st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
        | st.sampled_from(["<|eot_id|>", "<|begin_of_text|>", "  ", "\n\n", "2026"]),
        max_size=8,
    ).map("".join),
    special=st.booleans(),
)
def test_served_text_ids_equal_the_tokenizers_library(llama_codec, text, special):
    tokenizer = llama_codec.codec.tokenizer
    expected = tokenizer.encode(text, add_special_tokens=special).ids
    assert llama_codec.encode(text, add_special_tokens=special) == expected
