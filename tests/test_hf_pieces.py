"""Hugging Face tokenization piece by piece is exact: the same ids, starts and spans as one
whole-text encode, and as transformers' `apply_chat_template(tokenize=True)`."""

from __future__ import annotations

import copy
import re
from bisect import bisect_right

import jinja2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pcache.cache.profiles import load_profile
from pcache.errors import TokenizerError
from pcache.pipeline import Settings
from pcache.prompt.renderers.chat_jinja import _tojson
from pcache.prompt.renderers.provenance import message_index
from pcache.prompt.renderers.render import prompt_token_ids, render, resolve_renderer
from pcache.prompt.shapes.request import request_from_document
from pcache.prompt.tokenizers.hf_pieces import HFPieces, longest_match_pattern
from pcache.prompt.tokenizers.segment_cache import SegmentCachedRenderer
from pcache.rules.context import LintSettings, RequestContext
from pcache.rules.runner import LintOptions, lint_values
from pcache.text.prefix import common_prefix_length
from tests.fixtures import HF_FIXTURES, hf_model_dir, hf_reference_tokenizer
from tests.fixtures.chat_corpus import CORPUS

FRAGMENTS = [
    "<|im_start|>",
    "<|im_end|>",
    "<|endoftext|>",
    "<tool_call>",
    "</tool_call>",
    "<think>",
    "<|begin_of_text|>",
    "<|start_header_id|>",
    "<|end_header_id|>",
    "<|eot_id|>",
    "<|python_tag|>",
    "<|reserved_special_token_7|>",
    "<|",
    "|>",
    "<|im_start",
    "<tool_",
    "\n",
    "\n\n",
    " ",
    "   ",
    "\t",
    "\r\n",
    "e",
    "\u0301",  # combining acute: NFC composes it with a preceding e
    "é",
    "日本語",
    "😀",
    "1234567",
    "'s",
    " don't",
    '{"city": "Paris"}',
    "user",
    "assistant",
]
TEXTS = st.lists(st.sampled_from(FRAGMENTS) | st.text(max_size=8), max_size=30).map("".join)


def hf_renderer(model: str):
    return resolve_renderer(str(hf_model_dir(model)))


@pytest.mark.parametrize("model", HF_FIXTURES)
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts=st.lists(TEXTS, min_size=1, max_size=5))
def test_pieces_encode_exactly_like_the_whole_text(model: str, texts: list[str]):
    renderer = hf_renderer(model)
    cached = SegmentCachedRenderer(renderer, max_cached_tokens=40, max_listed_tokens=12)
    assert cached.enabled
    for text in texts + texts[::-1]:  # the second pass reads pieces from the cache
        whole = renderer.tokenizer.encode(text, add_special_tokens=False).ids
        ids, segments = cached.encode_segments(text)
        assert segments is not None
        assert ids == whole
        starts = renderer.encode_with_starts(text)[1]
        assert cached.starts(text, segments) == starts
        for char in range(0, len(text) + 1, max(1, len(text) // 7)):
            expected = max(0, bisect_right(starts, char) - 1)
            assert cached.token_of_char(text, segments, char) == expected
    cached.check_integrity()


def _session(case: dict) -> list[dict]:
    """The request and its growing predecessors: a session whose turns repeat."""
    messages = case["messages"]
    return [
        {**copy.deepcopy(case), "messages": copy.deepcopy(messages[:end])}
        for end in range(1, len(messages) + 1)
        if messages[end - 1]["role"] in ("user", "tool")
    ]


@pytest.mark.parametrize("model", HF_FIXTURES)
@pytest.mark.parametrize("case", sorted(CORPUS))
def test_lint_tokens_equal_apply_chat_template(model: str, case: str):
    """Tokens, starts and provenance of lint's cached path equal the uncached render's, and
    the ids equal transformers'."""
    renderer = hf_renderer(model)
    settings_ = LintSettings(SegmentCachedRenderer(renderer), load_profile("vllm"))
    reference = hf_reference_tokenizer(model)
    for document in _session(CORPUS[case]) * 2:
        request = request_from_document(copy.deepcopy(document), "case.json")
        try:
            expected = reference.apply_chat_template(
                copy.deepcopy(request.messages),
                tools=copy.deepcopy(request.tools) or None,
                add_generation_prompt=True,
                tokenize=True,
                return_dict=False,
            )
        except jinja2.TemplateError:  # the template refuses this conversation: so does pcache
            with pytest.raises(TokenizerError, match="refused"):
                render(request, renderer)
            continue
        context = RequestContext(request, settings_)
        assert context.token_ids == expected
        whole = render(request, renderer)
        for index in range(len(request.messages) + 1):  # one fenced render, or the spans
            starts = [s.start for s in whole.spans if message_index(s.normalized) >= index]
            _, deferred = renderer.render_text_deferred(request, settings_.options())
            assert deferred.message_start(index) == min(starts, default=None)
        assert context.rendered.token_starts == whole.token_starts
        assert context.rendered.spans == whole.spans


def test_a_template_that_refuses_the_shared_prefix_alone_still_lints():
    """Llama 3.1 writes tools into the first user message, so it cannot render the system
    message alone; the prefix every session shares ends where that user text begins."""
    tools = [copy.deepcopy(CORPUS["tools-one-call"]["tools"][0])]
    system = {"role": "system", "content": "You are a careful assistant. " * 20}

    def body(question: str) -> dict:
        return {"messages": [system, {"role": "user", "content": question}], "tools": tools}

    renderer = hf_renderer("llama3.1")
    settings_ = LintSettings(SegmentCachedRenderer(renderer), load_profile("vllm"))
    first, second = (
        RequestContext(request_from_document(body(q), "x.json"), settings_)
        for q in ("Alpha question?", "Where is my parcel now?")
    )
    shared = common_prefix_length(first.token_ids, second.token_ids)
    assert first.tokens_before_message(1) == shared > 100
    report = lint_values(
        [body("Alpha question?"), body("Where is my parcel now?")],
        LintOptions(settings=Settings(tokenizer=str(hf_model_dir("llama3.1")))),
    )
    assert "PC501" not in {d.code for d in report.diagnostics}


# --- where the pieces are cut -------------------------------------------------------------


def _tokenizer(added: list[tuple[str, dict]], pre_tokenizer=None):
    from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers

    vocabulary = {chr(c): i for i, c in enumerate(range(32, 127))}
    vocabulary.update({"▁" + chr(c): 200 + i for i, c in enumerate(range(97, 123))})
    vocabulary["▁"] = 300
    tokenizer = Tokenizer(models.WordLevel(vocabulary, unk_token="~"))
    tokenizer.pre_tokenizer = pre_tokenizer or pre_tokenizers.Split("", "isolated")
    for content, flags in added:
        token = AddedToken(content, **{"normalized": False, **flags})
        if flags.get("special"):
            tokenizer.add_special_tokens([token])
        else:
            tokenizer.add_tokens([token])
    return tokenizer


OVERLAPPING = [
    ("<|a|>", {"special": True}),
    ("<|a|>b", {"special": True}),
    ("a|>", {"special": False}),
    ("<|", {"special": False}),
    ("xyz", {"special": False}),
]


def _exact(tokenizer, texts: list[str]) -> None:
    pieces = HFPieces.of(tokenizer)
    assert pieces is not None
    for text in texts:
        parts = pieces.parts(text)
        assert "".join(parts) == text
        ids: list[int] = []
        for index, part in enumerate(parts):
            if index % 2:
                ids.append(pieces.special_ids[part])
            else:
                ids += pieces.encode_pieces([part])[0]
        assert ids == tokenizer.encode(text, add_special_tokens=False).ids, text
        starts = [start for start, _ in tokenizer.encode(text, add_special_tokens=False).offsets]
        assert SegmentCachedRenderer(_Bare(tokenizer, pieces)).starts(text, parts) == starts


class _Bare:
    """The least a renderer needs for the segment cache: a name and a piece encoder."""

    name = "bare"
    template_digest = ""

    def __init__(self, tokenizer, pieces):
        self.tokenizer = tokenizer
        self.pieces = pieces

    def piece_encoder(self):
        return self.pieces


@settings(max_examples=150, deadline=None)
@given(
    texts=st.lists(
        st.lists(
            st.sampled_from(["<|a|>", "<|a", "a|>", "b", "<|", "|", "<", "xy", "z", " ", "a"]),
            max_size=12,
        ).map("".join),
        min_size=1,
        max_size=4,
    )
)
def test_overlapping_added_tokens_are_cut_leftmost_longest(texts: list[str]):
    _exact(_tokenizer(OVERLAPPING), texts)
    from tokenizers import pre_tokenizers

    metaspace = pre_tokenizers.Metaspace(prepend_scheme="always")
    _exact(_tokenizer(OVERLAPPING, metaspace), [" " + text for text in texts])


def test_special_tokens_read_as_text_are_not_cut():
    tokenizer = _tokenizer(OVERLAPPING)
    tokenizer.encode_special_tokens = True
    _exact(tokenizer, ["<|a|>b and <|a|> and a|>", "xyz<|a|>"])
    assert "<|a|>" not in HFPieces.of(tokenizer).special_ids


@pytest.mark.parametrize("flag", ["lstrip", "rstrip", "single_word"])
def test_tokens_that_match_with_context_disable_pieces(flag: str):
    assert HFPieces.of(_tokenizer([("<x>", {"special": True, flag: True})])) is None
    assert HFPieces.of(_tokenizer([("<x>", {"special": True})])) is not None


def test_a_pre_tokenizer_that_treats_the_first_piece_apart_disables_pieces():
    from tokenizers import pre_tokenizers

    first = pre_tokenizers.Metaspace(prepend_scheme="first")
    assert HFPieces.of(_tokenizer([("<x>", {"special": True})], first)) is None
    sequence = pre_tokenizers.Sequence([pre_tokenizers.Digits(), first])
    assert HFPieces.of(_tokenizer([("<x>", {"special": True})], sequence)) is None


@given(
    words=st.lists(st.text("ab<|>", min_size=1, max_size=5), min_size=1, max_size=8),
    text=st.text("ab<|> ", max_size=40),
)
def test_the_trie_pattern_matches_like_longest_first_alternation(words: list[str], text: str):
    trie = re.compile(longest_match_pattern(words))
    alternation = re.compile("|".join(map(re.escape, sorted(set(words), key=len, reverse=True))))
    assert [m.span() for m in trie.finditer(text)] == [m.span() for m in alternation.finditer(text)]


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(st.text(max_size=3) | st.integers(), children, max_size=3)
    ),
    max_leaves=10,
)


@given(
    values=st.lists(JSON_VALUES, min_size=1, max_size=4),
    indent=st.sampled_from([2, 4, "\t"]),
    sort_keys=st.booleans(),
    ensure_ascii=st.booleans(),
)
def test_remembered_indented_tojson_equals_json_dumps(values, indent, sort_keys, ensure_ascii):
    import json

    for value in values + values:
        try:
            expected = json.dumps(
                value, ensure_ascii=ensure_ascii, indent=indent, sort_keys=sort_keys
            )
        except TypeError:  # keys of mixed types do not sort
            with pytest.raises(TypeError):
                _tojson(value, ensure_ascii=ensure_ascii, indent=indent, sort_keys=sort_keys)
            continue
        assert (
            _tojson(value, ensure_ascii=ensure_ascii, indent=indent, sort_keys=sort_keys)
            == expected
        )
        separators = [",", ": "]  # a Jinja list: unhashable, still honoured
        assert _tojson(value, indent=indent, separators=separators, sort_keys=sort_keys) == (
            json.dumps(
                value,
                ensure_ascii=False,
                indent=indent,
                separators=(",", ": "),
                sort_keys=sort_keys,
            )
        )


@pytest.mark.parametrize("tokenizer", ["gpt-oss", "o200k_base", *HF_FIXTURES])
def test_bulk_token_ids_equal_the_full_render(tokenizer: str):
    """The bulk path (trace readers) gives `render`'s ids, with or without the piece cache."""
    renderer = hf_renderer(tokenizer) if tokenizer in HF_FIXTURES else resolve_renderer(tokenizer)
    cached = SegmentCachedRenderer(renderer)
    documents = [*CORPUS.values(), {"prompt": "<|im_start|>raw <|eot_id|> text"}]
    for document in documents * 2:
        request = request_from_document(copy.deepcopy(document), "case.json")
        try:
            expected = render(request, renderer).token_ids
        except TokenizerError:  # a conversation this template refuses
            continue
        assert prompt_token_ids(request, cached) == expected
        assert prompt_token_ids(request, renderer) == expected
