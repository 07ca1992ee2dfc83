"""Request.source_path: the longest origin that the normalized path starts with wins."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from pcache.prompt.shapes.request import Request

STEP = st.sampled_from(
    [
        "messages",
        "[0]",
        "[1]",
        "[12]",
        ".content",
        ".tool_calls",
        ".function",
        ".arguments",
        ".text",
        "tools",
        ".name",
    ]
)
PATH = st.lists(STEP, min_size=1, max_size=5).map("".join)


def reference(origins: dict[str, str], normalized: str) -> str:
    best = ""
    for key in origins:
        matches = normalized == key or normalized.startswith((key + ".", key + "["))
        if matches and len(key) > len(best):
            best = key
    return origins[best] + normalized[len(best) :] if best else normalized


@settings(max_examples=300, deadline=None)
@given(keys=st.lists(PATH, max_size=6), normalized=PATH, prefix=st.sampled_from(["", "body"]))
def test_source_path_matches_the_longest_origin(keys, normalized, prefix):
    origins = {key: f"raw.{key}" for key in keys}
    request = Request(source="x", line=None, kind="openai", raw={}, path_prefix=prefix)
    request.origins = origins
    expected = reference(origins, normalized)
    if prefix:
        expected = f"{prefix}.{expected}" if expected else prefix
    assert request.source_path(normalized) == expected
