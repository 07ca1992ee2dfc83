"""Where two requests stop sharing a cached prefix, how much each cache reuses, and why.

Pure functions on two hashed prompts (`pcache.comparison.compare` loads and hashes them first,
and names the lint rule the cause breaks); the cause comes from the one classifier
(`pcache.divergence.classify`), exactly as `pcache lint` reports it; `pcache.cli.diff` renders
the result.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, field

import orjson

from pcache.cache.profiles import (
    PROFILE_NAMES,
    Profile,
    assumption,
    profile_for_model,
    reusable_tokens,
)
from pcache.divergence.classify import Cause, explain, make_cause
from pcache.divergence.sessions import pair_continues
from pcache.pipeline import HashedPrompt
from pcache.prompt.renderers.rendered import RenderedPrompt
from pcache.prompt.shapes.request import KIND_ANTHROPIC, KIND_BEDROCK, KIND_TOKEN_IDS
from pcache.text.prefix import common_prefix_length


@dataclass(slots=True)
class DiffResult:
    """Everything `pcache diff` reports; the JSON output is this dataclass."""

    a: str
    b: str
    tokenizer: str
    hash_algo: str
    block_size: int
    num_tokens: list[int]
    num_blocks: list[int]
    identical: bool
    first_divergence_token: int | None
    first_divergent_block: int | None
    first_divergence_char: int | None
    common_blocks: int
    reusable_tokens: dict[str, int]
    cause: Cause | None
    a_tokens: list[int] = field(default_factory=list)
    b_tokens: list[int] = field(default_factory=list)
    window_start: int = 0
    reuse_assumes: dict[str, str] = field(default_factory=dict)
    """What each profile's `reusable_tokens` figure assumes (`profiles.assumption`), with the
    minimum prefix of B's model where the data file lists one."""

    def to_json(self) -> bytes:
        from dataclasses import asdict

        return orjson.dumps(asdict(self), option=orjson.OPT_SORT_KEYS)


def diff(a: HashedPrompt, b: HashedPrompt) -> DiffResult:
    """Compare two hashed prompts rendered with the same settings (the cause's `rule` is left
    for the caller: `pcache.comparison.compare` names it)."""
    ra, rb = a.rendered, b.rendered
    size = a.settings.block_size
    common = common_prefix_length(ra.token_ids, rb.token_ids)
    same_tokens = common == ra.num_tokens == rb.num_tokens
    common_blocks = common_prefix_length(a.hashes, b.hashes)
    divergence = None if same_tokens else common
    cause = None
    char = None
    if not same_tokens:
        found = explain(ra, rb, common, same_conversation=pair_continues(ra.request, rb.request))
        char, cause = found.a_char, found.cause
    elif a.settings.cache_salt != b.settings.cache_salt:
        cause = make_cause("cache_salt", None, None, "", "", detail="cache_salt differs")
    else:
        cause = make_cause("identical", None, None, "", "")
    start = (common // size) * size if divergence is not None else 0
    return DiffResult(
        a=ra.request.label,
        b=rb.request.label,
        tokenizer=ra.renderer,
        hash_algo=a.settings.algo,
        block_size=size,
        num_tokens=[ra.num_tokens, rb.num_tokens],
        num_blocks=[len(a.hashes), len(b.hashes)],
        identical=same_tokens,
        first_divergence_token=divergence,
        first_divergent_block=None if divergence is None else divergence // size,
        first_divergence_char=char,
        common_blocks=common_blocks,
        reusable_tokens=reuse_by_profile(a, b, common, common_blocks),
        reuse_assumes=reuse_assumptions(b),
        cause=cause,
        a_tokens=ra.token_ids[start : start + size] if divergence is not None else [],
        b_tokens=rb.token_ids[start : start + size] if divergence is not None else [],
        window_start=start,
    )


def reuse_by_profile(
    a: HashedPrompt, b: HashedPrompt, common: int, common_blocks: int
) -> dict[str, int]:
    size = a.settings.block_size
    same_namespace = a.settings.cache_salt == b.settings.cache_salt
    token_common = common if same_namespace else 0
    num_tokens_b = b.rendered.num_tokens
    result = {}
    for name in PROFILE_NAMES:
        profile = _profile_for(name, b)
        if name == "vllm":
            result[name] = reusable_tokens(profile, common_blocks * size, num_tokens_b, size)
        elif profile.granularity == "breakpoint":
            last_mark_b = max(breakpoint_positions(b.rendered), default=-1)
            # A's writes that B reads: B marks a breakpoint at or after them
            written = tuple(p for p in breakpoint_positions(a.rendered) if p <= last_mark_b)
            result[name] = reusable_tokens(profile, token_common, num_tokens_b, size, written)
        else:
            result[name] = reusable_tokens(profile, token_common, num_tokens_b, size)
    return result


def _profile_for(name: str, b: HashedPrompt) -> Profile:
    return profile_for_model(name, b.rendered.request.model)


def reuse_assumptions(b: HashedPrompt) -> dict[str, str]:
    """What each profile's reuse figure assumes, for B's model."""
    size = b.settings.block_size
    return {name: assumption(_profile_for(name, b), size) for name in PROFILE_NAMES}


def breakpoint_positions(rendered: RenderedPrompt) -> tuple[int, ...]:
    """Token positions where the request's cache_control markers end their block.

    Requests without explicit markers are read as Anthropic's automatic mode: one breakpoint at
    the end of the last message (before the generation prompt); a Bedrock Converse body without
    a `cachePoint` has none (Bedrock caches only at checkpoints). A Bedrock `cachePoint` block
    ends where the content before it ends (`cache_point_end`).
    """
    request = rendered.request
    if request.kind == KIND_TOKEN_IDS:
        return (rendered.num_tokens,)
    if request.kind == KIND_BEDROCK:
        ends = (cache_point_end(rendered, mark) for mark in request.breakpoints)
        found = [end for end in ends if end is not None]
        return tuple(sorted({_token_at(rendered, end) for end in found}))
    marks = list(request.breakpoints)
    if not marks or (request.kind == KIND_ANTHROPIC and "cache_control" in request.raw):
        marks.append("")
    positions = []
    for mark in marks:
        if mark == "":
            end = max((span.end for span in rendered.spans), default=len(rendered.text))
        else:
            full = request.source_path(mark) if request.path_prefix else mark
            ends = [
                span.end
                for span in rendered.spans
                if span.path == full or span.path.startswith((full + ".", full + "["))
            ]
            if not ends:
                continue
            end = max(ends)
        positions.append(_token_at(rendered, end))
    return tuple(sorted(set(positions)))


def _token_at(rendered: RenderedPrompt, end: int) -> int:
    return bisect_left(rendered.token_starts, end) if rendered.text else end


def cache_point_end(rendered: RenderedPrompt, mark: str) -> int | None:
    """The character where the content a Bedrock `cachePoint` at `mark` (`system[1]`,
    `messages[2].content[3]`, `toolConfig.tools[2]`) caches ends: the end of the spans of the
    blocks before it in its list (None: nothing rendered before it there)."""
    request = rendered.request
    head, _, tail = mark.rpartition("[")
    index = int(tail.rstrip("]"))
    full = f"{request.path_prefix}.{head}" if request.path_prefix else head
    before = tuple(f"{full}[{j}]" for j in range(index))
    ends = [
        span.end
        for span in rendered.spans
        if span.path in before or span.path.startswith(tuple(p + c for p in before for c in ".["))
    ]
    return max(ends, default=None)
