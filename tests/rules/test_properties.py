"""Properties: the segment cache is exact; append-only sessions are silent and cost nothing."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pcache.pipeline import Settings
from pcache.prompt.renderers.render import resolve_renderer
from pcache.prompt.tokenizers.segment_cache import SegmentCachedRenderer, _array_encoder
from pcache.rules.runner import LintOptions, lint_values

PIECES = st.sampled_from(
    [
        "<|endoftext|>",
        "<|endofprompt|>",
        " ",
        "\n",
        "\n\n",
        "  ",
        "é",
        "😀",
        "日本",
        "a",
        "The",
        " cat",
        "123",
        '{"k": 1}',
        "<|",
        "|>",
        "\r\n",
        "\u0301",
        "tool",
        "<|im_start|>",
    ]
)
TEXT = st.lists(st.one_of(PIECES, st.text(max_size=12)), max_size=40).map("".join)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts=st.lists(TEXT, min_size=1, max_size=4))
def test_segment_cache_encodes_exactly_like_the_tokenizer(texts):
    plain = resolve_renderer("o200k_base")
    cached = SegmentCachedRenderer(plain, max_cached_tokens=64, max_listed_tokens=16)
    for text in texts + texts:  # second pass reads from the cache
        assert cached.encode_with_starts(text) == plain.encode_with_starts(text)
    cached.check_integrity()


@settings(max_examples=300, deadline=None)
@given(
    text=st.lists(PIECES | st.sampled_from(["\ud800", "\udfff", "<|start|>"]), max_size=30).map(
        "".join
    )
)
def test_pieces_are_encoded_into_arrays_as_encode_ordinary_encodes_them(text):
    """Through tiktoken's token buffer: special tokens' text and lone surrogates included."""
    for name in ("o200k_base", "gpt-oss"):
        encoding = resolve_renderer(name).encoding
        assert _array_encoder(encoding)(text).tolist() == encoding.encode_ordinary(text)


WORDS = st.text(alphabet="abcdefghij KLMN.,?", min_size=1, max_size=30).map(str.strip).filter(bool)


@st.composite
def conversations(draw):
    messages = [{"role": "system", "content": "You are a helpful agent. " + draw(WORDS)}]
    for turn in range(draw(st.integers(1, 5))):
        messages.append({"role": "user", "content": draw(WORDS)})
        if draw(st.booleans()):
            call_id = f"call_{turn}"
            arguments = '{"q": "' + draw(WORDS) + '"}'
            messages.append(
                {
                    "role": "assistant",
                    "content": draw(WORDS),
                    "tool_calls": [
                        {
                            "id": call_id,
                            "type": "function",
                            "function": {"name": "search", "arguments": arguments},
                        }
                    ],
                }
            )
            messages.append({"role": "tool", "tool_call_id": call_id, "content": draw(WORDS)})
        messages.append({"role": "assistant", "content": draw(WORDS)})
    return messages


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    sessions=st.lists(conversations(), min_size=1, max_size=3),
    with_ids=st.booleans(),
    profile=st.sampled_from(["vllm", "sglang"]),
)
def test_append_only_sessions_are_never_reported(sessions, with_ids, profile):
    tools = [
        {
            "type": "function",
            "function": {
                "name": "search",
                "description": "Search.",
                "parameters": {"properties": {"q": {"type": "string"}}, "type": "object"},
            },
        }
    ]
    requests = []
    shared_system = sessions[0][0]  # one app: every session sends the same system prompt
    for number, messages in enumerate(sessions):
        messages = [shared_system, *messages[1:]]
        for end in range(2, len(messages) + 1):
            if messages[end - 1]["role"] in ("user", "tool"):
                body = {"messages": messages[:end], "tools": tools}
                if with_ids:
                    body["session_id"] = f"s{number}"
                requests.append(body)
    report = lint_values(
        requests, LintOptions(settings=Settings(tokenizer="o200k_base", profile=profile))
    )
    assert not report.diagnostics, [(d.code, d.message) for d in report.diagnostics]
    assert report.failing == 0
    summary = report.summary
    assert summary.unattributed_tokens == summary.prompt_tokens - summary.reusable_tokens
    assert summary.reusable_tokens_if_fixed == summary.reusable_tokens
    if with_ids:
        assert summary.sessions == len(sessions)


CONTENT = st.lists(
    PIECES | st.sampled_from(["<|start|>", "<|end|>", "<|message|>", "<|call|>"]), max_size=12
).map("".join)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(contents=st.lists(CONTENT, min_size=2, max_size=6))
def test_segment_cache_is_exact_for_the_gpt_oss_renderer(contents):
    from pcache.prompt.renderers.interface import RenderOptions
    from pcache.prompt.shapes.request import request_from_document

    harmony = resolve_renderer("gpt-oss")
    cached = SegmentCachedRenderer(harmony, max_cached_tokens=256, max_listed_tokens=32)
    roles = ["system", "user", "assistant"]
    messages = [{"role": roles[min(i, 1 + i % 2)], "content": c} for i, c in enumerate(contents)]
    for end in (len(messages), len(messages) - 1, len(messages)):
        request = request_from_document({"messages": messages[:end]}, "x")
        text, _ = cached.render_text(request, RenderOptions())
        expected = harmony.encode_with_starts(text)
        ids, segments = cached.encode_segments(text)
        assert segments is not None
        assert (ids, cached.starts(text, segments)) == expected
    cached.check_integrity()
