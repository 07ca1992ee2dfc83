"""tiktoken over a converted tokenizer.json gives `tokenizers`' ids exactly, on every tokenizer
fixture; files it would not encode exactly are left to `tokenizers`, and say why."""

from __future__ import annotations

import copy
import functools
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pcache.prompt.renderers.hf_template import load_hf_renderer
from pcache.prompt.tokenizers import tiktoken_bpe
from pcache.prompt.tokenizers.hf_pieces import monotonic_starts
from pcache.prompt.tokenizers.tiktoken_bpe import NotConvertible, convert, converted_or_reason
from tests.fixtures import HF_FIXTURES, hf_model_dir

LOOK_ALIKES = [
    "<|im_start|>",
    "<|im_end|>",
    "<|endoftext|>",
    "<|begin_of_text|>",
    "<|eot_id|>",
    "<|start_header_id|>",
    "<|reserved_special_token_3|>",
    "<tool_call>",
    "<think>",
    "<|",
    "|>",
    "<|im_",
    "<|eot_id",
    "<|endoftext|",
]
FRAGMENTS = [
    *LOOK_ALIKES,
    " ",
    "  ",
    "\t",
    "\n",
    "\r\n",
    "\u00a0",
    "\u2003",
    "\u3000",
    "'s",
    "'LL",
    " don't",
    "e\u0301",
    "\u212b",  # Angstrom sign: NFC makes it Å
    "😀",
    "👩‍💻",
    "🇫🇷",
    "日本語",
    "ﷺ",
    "٣٤٥",
    "1234567890",
    "3.14159",
]
WHITESPACE = st.text(alphabet=" \t\n\r\u00a0\u2009\u3000\x0b\x0c", min_size=1, max_size=40)
DIGITS = st.text(alphabet="0123456789٠١٢३४", min_size=1, max_size=30)
REPEATED = st.builds(
    lambda word, count, sep: sep.join([word] * count),
    st.text(min_size=1, max_size=6),
    st.integers(1, 60),
    st.sampled_from(["", " ", "\n", "-"]),
)
ANY_UNICODE = st.text(st.characters(exclude_categories=("Cs",)), max_size=40)
TEXTS = st.lists(
    st.sampled_from(FRAGMENTS) | WHITESPACE | DIGITS | REPEATED | ANY_UNICODE, max_size=12
).map("".join)


@functools.cache
def fixture(model: str):
    """The fixture's renderer (tiktoken path) and `tokenizers`' own tokenizer of the file."""
    from tokenizers import Tokenizer

    directory = hf_model_dir(model)
    renderer = load_hf_renderer(str(directory))
    reference = Tokenizer.from_file(str(directory / "tokenizer.json"))
    return renderer, reference


@pytest.mark.parametrize("model", HF_FIXTURES)
def test_every_fixture_takes_the_tiktoken_path(model: str):
    renderer, _ = fixture(model)
    assert renderer.fast is not None, renderer.encoder_path
    assert renderer.encoder_path.startswith("tiktoken")


@pytest.mark.parametrize("model", HF_FIXTURES)
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=TEXTS)
def test_ids_and_starts_equal_tokenizers(model: str, text: str):
    renderer, reference = fixture(model)
    expected = reference.encode(text, add_special_tokens=False)
    assert renderer.encode(text) == expected.ids
    ids, starts = renderer.encode_with_starts(text)
    assert ids == expected.ids
    assert starts == monotonic_starts(expected.offsets)


@pytest.mark.parametrize("model", HF_FIXTURES)
def test_long_texts_equal_tokenizers(model: str):
    """Source files, long repeated words and long whitespace runs, encoded whole."""
    renderer, reference = fixture(model)
    root = Path(tiktoken_bpe.__file__).parent
    texts = [path.read_text(encoding="utf-8") for path in sorted(root.glob("*.py"))]
    texts += ["ab" * 5000, "a" * 3000, " " * 1000 + "x", "\n" * 500, "ééé" * 700, "🙂" * 300]
    for text in texts:
        assert renderer.encode(text) == reference.encode(text, add_special_tokens=False).ids


@functools.cache
def fixture_state(model: str) -> dict:
    return json.loads((hf_model_dir(model) / "tokenizer.json").read_text(encoding="utf-8"))


def changed(model: str, change) -> dict:
    state = copy.deepcopy(fixture_state(model))
    change(state)
    return state


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda s: s.update(normalizer={"type": "Lowercase"}), "normalizer Lowercase"),
        (lambda s: s.update(normalizer={"type": "NFKC"}), "normalizer NFKC"),
        (lambda s: s["model"].update(dropout=0.1), "dropout"),
        (lambda s: s["model"].update(type="WordPiece"), "model WordPiece"),
        (lambda s: s["model"].update(continuing_subword_prefix="##"), "continuing_subword_prefix"),
        (lambda s: s["model"].update(end_of_word_suffix="</w>"), "end_of_word_suffix"),
        (lambda s: s["model"].update(byte_fallback=True), "byte_fallback"),
        (lambda s: s["model"]["merges"].pop(1000), "do not list"),
        (lambda s: s["model"]["merges"].reverse(), "order of the ids"),
        (lambda s: s["added_tokens"][0].update(normalized=True), "after normalizing"),
        (lambda s: s["pre_tokenizer"]["pretokenizers"][0].update(pattern={"Regex": "a"}), "regex"),
        (lambda s: s["pre_tokenizer"]["pretokenizers"][0].update(behavior="Removed"), "behavior"),
        (lambda s: s["pre_tokenizer"]["pretokenizers"][1].update(add_prefix_space=True), "prefix"),
        (lambda s: s.update(pre_tokenizer={"type": "Metaspace"}), "pre-tokenizer Metaspace"),
        (lambda s: s["model"]["vocab"].update({"▁x": 999_999}), "byte-level alphabet"),
    ],
)
def test_what_tiktoken_would_not_encode_exactly_is_refused(change, reason: str):
    with pytest.raises(NotConvertible, match=reason):
        convert(changed("llama3.1", change))


def test_gpt2_byte_level_regex_converts():
    """ByteLevel with its own regex and no Split: GPT-2's pattern."""

    def byte_level_only(state: dict) -> None:
        state["pre_tokenizer"] = {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True}

    assert convert(changed("llama3.1", byte_level_only)).pattern == tiktoken_bpe.GPT2_PATTERN


def small_bpe(tokens: dict[str, int], merges: list[list[str]], ignore_merges: bool) -> dict:
    """A byte-level BPE tokenizer.json state: the 256 bytes, then `tokens`."""
    decoder = tiktoken_bpe.byte_decoder()
    vocab = {character: byte for character, byte in decoder.items()}
    vocab.update(tokens)
    model = {"type": "BPE", "vocab": vocab, "merges": merges, "ignore_merges": ignore_merges}
    return {
        "normalizer": None,
        "added_tokens": [],
        "pre_tokenizer": {
            "type": "ByteLevel",
            "add_prefix_space": False,
            "trim_offsets": False,
            "use_regex": True,
        },
        "model": model,
    }


def test_merges_must_be_complete_and_in_id_order():
    tokens = {"ab": 256, "bc": 257, "abc": 258}
    with pytest.raises(NotConvertible, match="do not list"):  # tiktoken would merge a + bc
        convert(small_bpe(tokens, [["a", "b"], ["b", "c"], ["ab", "c"]], True))
    complete = [["a", "b"], ["b", "c"], ["ab", "c"], ["a", "bc"]]
    assert convert(small_bpe(tokens, complete, True)).ranks[b"abc"] == 258
    with pytest.raises(NotConvertible, match="order of the ids"):
        convert(small_bpe(tokens, [complete[1], complete[0], *complete[2:]], True))


def test_without_ignore_merges_every_token_must_merge_into_itself():
    """ "abcd" is a token, but "bc" merges first and nothing joins a + bc + d: tiktoken takes
    the token whole, `tokenizers` without `ignore_merges` does not."""
    from tokenizers import Tokenizer

    tokens = {"bc": 256, "ab": 257, "cd": 258, "abcd": 259}
    merges = [["b", "c"], ["a", "b"], ["c", "d"], ["ab", "cd"]]
    with pytest.raises(NotConvertible, match="does not merge into itself"):
        convert(small_bpe(tokens, merges, ignore_merges=False))
    state = small_bpe(tokens, merges, ignore_merges=True)
    converted = convert(state)
    encoding = tiktoken_bpe.encoding_of(converted, "small")
    blank = {"truncation": None, "padding": None, "post_processor": None, "decoder": None}
    model = {"dropout": None, "unk_token": None, "fuse_unk": False, "byte_fallback": False}
    state["model"] = {**model, **state["model"]}
    reference = Tokenizer.from_str(json.dumps({"version": "1.0", **blank, **state}))
    for text in ("abcd", "xabcd abcd", "abc bcd", "dcba"):
        assert encoding.encode_ordinary(text) == reference.encode(text).ids


def test_the_conversion_is_cached_and_a_corrupt_cache_is_rebuilt(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    data = (hf_model_dir("qwen3") / "tokenizer.json").read_bytes()
    digest = "0" * 64
    first = converted_or_reason(data, digest)
    assert not isinstance(first, str)
    path = tiktoken_bpe.cache_path(digest)
    assert path.is_file() and str(path).startswith(str(tmp_path))

    def must_not_convert(state):
        raise AssertionError("converted again although the cache holds the result")

    monkeypatch.setattr(tiktoken_bpe, "convert", must_not_convert)
    second = converted_or_reason(data, digest)
    assert not isinstance(second, str)
    assert second.ranks == first.ranks and second.pattern == first.pattern and second.nfc
    monkeypatch.undo()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    for garbage in (b"", b"\x00not marshal", path.read_bytes()[:1000]):
        path.write_bytes(garbage)
        rebuilt = converted_or_reason(data, digest)
        assert not isinstance(rebuilt, str) and rebuilt.ranks == first.ranks
        assert tiktoken_bpe._read_cache(path) is not None  # written again, whole


def test_a_refused_file_is_cached_with_its_reason(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    state = changed("llama3.1", lambda s: s.update(normalizer={"type": "Lowercase"}))
    data = json.dumps(state).encode()
    assert converted_or_reason(data, "1" * 64) == "normalizer Lowercase (only none or NFC convert)"
    assert tiktoken_bpe._read_cache(tiktoken_bpe.cache_path("1" * 64)) == (
        "normalizer Lowercase (only none or NFC convert)"
    )


def test_refused_tokenizers_encode_with_tokenizers(tmp_path, monkeypatch):
    """A model dir whose tokenizer.json does not convert is encoded by `tokenizers`, which
    `encoder_path` says, with the reason."""
    source = hf_model_dir("qwen2.5")
    target = tmp_path / "lowercased"
    target.mkdir()
    state = json.loads((source / "tokenizer.json").read_text(encoding="utf-8"))
    state["normalizer"] = {"type": "Sequence", "normalizers": [{"type": "Lowercase"}]}
    (target / "tokenizer.json").write_text(json.dumps(state), encoding="utf-8")
    (target / "tokenizer_config.json").write_bytes((source / "tokenizer_config.json").read_bytes())
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    renderer = load_hf_renderer(str(target))
    assert renderer.fast is None
    assert renderer.encoder_path == "tokenizers (normalizer Lowercase (only none or NFC convert))"
    assert renderer.encode("Hello World") == renderer.tokenizer.encode("hello world").ids


def test_pcache_tokenizers_env_turns_the_fast_path_off(monkeypatch):
    monkeypatch.setenv("PCACHE_TOKENIZERS", "1")
    renderer = load_hf_renderer(str(hf_model_dir("llama3.1")))
    assert renderer.fast is None and "PCACHE_TOKENIZERS" in renderer.encoder_path
    fast, _ = fixture("llama3.1")
    text = "Hello <|eot_id|> world 日本語 " * 20
    assert renderer.encode(text) == fast.encode(text)
    assert renderer.name == fast.name  # the same tokenizer: the same hash namespace
