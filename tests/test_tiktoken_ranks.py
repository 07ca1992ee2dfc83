"""The marshal copy of the BPE ranks is exactly what tiktoken parses from the vocabulary."""

from __future__ import annotations

import hashlib

import pytest
import tiktoken.load

from pcache.prompt.tokenizers import tiktoken_offline


@pytest.mark.parametrize("vocabulary", ["o200k_base", "cl100k_base"])
def test_cached_ranks_equal_tiktoken_parse(tmp_path, monkeypatch, vocabulary):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    folder = tiktoken_offline._materialize(vocabulary)
    file_name, expected = tiktoken_offline.VOCABULARIES[vocabulary]
    source = folder / hashlib.sha1((tiktoken_offline._BASE_URL + file_name).encode()).hexdigest()
    reference = tiktoken.load.load_tiktoken_bpe(str(source), expected)
    parsed = tiktoken_offline._cached_ranks(vocabulary, folder)  # parses, writes marshal
    reloaded = tiktoken_offline._cached_ranks(vocabulary, folder)  # reads marshal
    assert parsed == reference
    assert reloaded == reference
    corrupt = next(folder.glob("*.ranks.marshal"))
    corrupt.write_bytes(b"\x00garbage")
    assert tiktoken_offline._cached_ranks(vocabulary, folder) == reference
