"""Where two requests stop sharing a cached prefix, how much each cache reuses, and why.

Pure functions on two hashed prompts (`compare` loads and hashes them first); `pcache.cli.diff`
renders the result.
"""

from __future__ import annotations

import unicodedata
from bisect import bisect_left
from dataclasses import dataclass, field
from typing import Any

import orjson

from pcache.api import callable_module
from pcache.cache.profiles import PROFILE_NAMES, load_profile, reusable_tokens
from pcache.jsonpath import get_path, head
from pcache.patterns import CLOCK, DATE, EPOCH, RANDOM_ID, TOOL_CALL_ID, matches_at
from pcache.pipeline import HashedPrompt, Settings, hash_request
from pcache.prefix import common_prefix_length
from pcache.prompt.rendered import RenderedPrompt
from pcache.prompt.request import KIND_ANTHROPIC, KIND_TOKEN_IDS, Request, tool_names

EXCERPT_BEFORE = 32
EXCERPT_AFTER = 48

HINTS = {
    "identical": "Nothing to fix: B reuses everything a cache can reuse.",
    "append": "Nothing to fix: B extends A, so A's prefix is reused (append-only history).",
    "cache_salt": "The requests use different cache salts, which isolates their caches on purpose.",
    "clock": "Move the clock value out of the prefix: into the newest user turn or request"
    " metadata, or round it to the day.",
    "random_id": "Drop per-request ids from the prompt, or move them to metadata or headers.",
    "key_order": "Serialize JSON deterministically (sorted keys) for schemas you write; replay"
    " the model's own tool-call arguments byte for byte, never re-dumped.",
    "whitespace": "Normalize whitespace and line endings once, before the text enters a prompt.",
    "tool_order": "Send tools in a stable order (e.g. sorted by name after merging MCP servers).",
    "tool_set": "Send the full tool set every time and restrict per call with tool_choice /"
    " allowed_tools instead of adding or removing tools.",
    "tool_definition": "Keep tool descriptions and schemas static; move changing values into"
    " messages.",
    "tool_call_id": "Persist tool-call ids with the history instead of regenerating them.",
    "reasoning_dropped": "Replay the assistant's reasoning with its turn, as it was generated.",
    "history_truncated": "Drop old messages in large strides (or compact rarely) instead of"
    " sliding the window every turn.",
    "history_edit": "Keep history append-only: add new messages instead of editing old ones.",
    "system_prompt": "Keep the system prompt static; put per-request content in later turns.",
    "parameter": "Keep request parameters that the template renders (reasoning effort, response"
    " format, tool_choice) stable within a session.",
    "template": "The chat template renders the two requests differently at this point.",
    "content": "The requests differ here; everything after this point is recomputed.",
    "token_ids": "The token ids differ here; everything after this point is recomputed.",
}

SUMMARIES = {
    "identical": "the rendered prompts are identical",
    "append": "B extends A: A's whole prompt is a prefix of B's",
    "cache_salt": "same tokens, but a different cache salt",
    "clock": "a clock value changed",
    "random_id": "a random id changed",
    "key_order": "the same JSON was serialized with a different key order",
    "whitespace": "only whitespace or Unicode normalization differs",
    "tool_order": "the same tools are sent in a different order",
    "tool_set": "the set of tools changed",
    "tool_definition": "a tool definition changed",
    "tool_call_id": "a historical tool-call id was regenerated",
    "reasoning_dropped": "an assistant turn lost its reasoning on replay",
    "history_truncated": "old messages were dropped from the head of the history",
    "history_edit": "an earlier message was edited",
    "system_prompt": "the system prompt changed",
    "parameter": "a request parameter that the template renders changed",
    "template": "the chat template wrote different text",
    "content": "the content changed",
    "token_ids": "the token ids differ",
}


@dataclass(slots=True)
class Cause:
    """Why the prefix breaks: where in each request, what the text looks like, and a class."""

    kind: str
    a_path: str | None
    b_path: str | None
    a_excerpt: str
    b_excerpt: str
    summary: str
    hint: str
    detail: str = ""


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

    def to_json(self) -> bytes:
        from dataclasses import asdict

        return orjson.dumps(asdict(self), option=orjson.OPT_SORT_KEYS)


@dataclass(slots=True)
class Comparison:
    """A diff and the two hashed prompts it compared (the text view quotes their text)."""

    result: DiffResult
    a: HashedPrompt
    b: HashedPrompt


def compare(a: Any, b: Any, settings: Settings) -> Comparison:
    """Load, render and hash two requests (paths, bodies, SDK objects), then diff them."""
    from pcache.prompt.inputs import one_request

    hashed_a = hash_request(one_request(a, "A"), settings)
    hashed_b = hash_request(one_request(b, "B"), settings)
    return Comparison(diff(hashed_a, hashed_b), hashed_a, hashed_b)


def diff(a: HashedPrompt, b: HashedPrompt) -> DiffResult:
    """Compare two hashed prompts rendered with the same settings."""
    ra, rb = a.rendered, b.rendered
    size = a.settings.block_size
    common = common_prefix_length(ra.token_ids, rb.token_ids)
    same_tokens = common == ra.num_tokens == rb.num_tokens
    common_blocks = common_prefix_length(a.hashes, b.hashes)
    divergence = None if same_tokens else common
    cause = None
    char = None
    if not same_tokens:
        char, cause = explain(ra, rb, common)
    elif a.settings.cache_salt != b.settings.cache_salt:
        cause = _cause("cache_salt", None, None, "", "", detail="cache_salt differs")
    elif same_tokens:
        cause = _cause("identical", None, None, "", "")
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
        profile = load_profile(name)
        if name == "vllm":
            result[name] = reusable_tokens(profile, common_blocks * size, num_tokens_b, size)
        elif name == "anthropic":
            last_mark_b = max(breakpoint_positions(b.rendered), default=-1)
            # A's writes that B reads: B marks a breakpoint at or after them
            written = tuple(p for p in breakpoint_positions(a.rendered) if p <= last_mark_b)
            result[name] = reusable_tokens(profile, token_common, num_tokens_b, size, written)
        else:
            result[name] = reusable_tokens(profile, token_common, num_tokens_b, size)
    return result


def breakpoint_positions(rendered: RenderedPrompt) -> tuple[int, ...]:
    """Token positions where the request's cache_control markers end their block.

    Requests without explicit markers are read as Anthropic's automatic mode: one breakpoint at
    the end of the last message (before the generation prompt).
    """
    request = rendered.request
    if request.kind == KIND_TOKEN_IDS:
        return (rendered.num_tokens,)
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
        positions.append(bisect_left(rendered.token_starts, end) if rendered.text else end)
    return tuple(sorted(set(positions)))


# -- the cause ------------------------------------------------------------------------------


def _cause(
    kind: str,
    a_path: str | None,
    b_path: str | None,
    a_excerpt: str,
    b_excerpt: str,
    detail: str = "",
) -> Cause:
    return Cause(kind, a_path, b_path, a_excerpt, b_excerpt, SUMMARIES[kind], HINTS[kind], detail)


def _excerpt(text: str, char: int) -> str:
    return text[max(0, char - EXCERPT_BEFORE) : char + EXCERPT_AFTER]


def explain(ra: RenderedPrompt, rb: RenderedPrompt, token: int) -> tuple[int | None, Cause]:
    """The first differing character and the classified cause of a divergence at `token`."""
    if ra.request.kind == KIND_TOKEN_IDS or rb.request.kind == KIND_TOKEN_IDS:
        window = slice(max(0, token - 4), token + 4)
        return None, _cause(
            "append" if token in (ra.num_tokens, rb.num_tokens) else "token_ids",
            ra.token_path(token),
            rb.token_path(token),
            str(ra.token_ids[window]),
            str(rb.token_ids[window]),
        )
    char = common_prefix_length(ra.text, rb.text, ra.token_char(token))
    a_excerpt, b_excerpt = _excerpt(ra.text, char), _excerpt(rb.text, char)
    if token == ra.num_tokens or char == len(ra.text):
        return char, _cause("append", None, rb.path_at(char), a_excerpt, b_excerpt)
    span_a, span_b = ra.span_at(char), rb.span_at(char)
    a_path = span_a.path if span_a else None
    b_path = span_b.path if span_b else None
    normalized = (span_a.normalized if span_a else None) or (span_b.normalized if span_b else None)
    kind, detail = classify(ra, rb, char, normalized)
    return char, _cause(kind, a_path, b_path, a_excerpt, b_excerpt, detail)


def classify(
    ra: RenderedPrompt, rb: RenderedPrompt, char: int, normalized: str | None
) -> tuple[str, str]:
    """Name the kind of difference at `char`, from the requests' structure and the text."""
    a, b = ra.request, rb.request
    text_kind = _text_kind(ra.text, rb.text, char)
    if normalized is None:
        parameter = _parameter_change(a, b)
        if parameter:
            return "parameter", parameter
        structural = _structural_difference(a, b)
        return structural if structural else ("template", "")
    key, index = head(normalized)
    if key == "tools":
        return _classify_tools(a, b, index, text_kind)
    if key == "messages" and index is not None:
        return _classify_message(a, b, index, normalized, text_kind)
    return (text_kind or "content"), ""


def _text_kind(a_text: str, b_text: str, char: int) -> str | None:
    if _both_match(_CHANGED_CLOCK, a_text, b_text, char):
        return "clock"
    if _both_match(_CHANGED_ID, a_text, b_text, char):
        return "random_id"
    at_space = a_text[char : char + 1].isspace() or b_text[char : char + 1].isspace()
    if at_space:
        left, right = _squash(a_text[char : char + 200]), _squash(b_text[char : char + 200])
        keep = min(len(left), len(right)) - 16
        if keep > 0 and left[:keep] == right[:keep]:
            return "whitespace"
    return None


_CHANGED_CLOCK = (CLOCK, DATE, EPOCH)
_CHANGED_ID = (RANDOM_ID, TOOL_CALL_ID)


def _both_match(patterns, a_text: str, b_text: str, char: int) -> bool:
    """Both sides hold a value of one of `patterns` around the first differing character."""
    return any(
        matches_at(pattern, a_text, char, 1) and matches_at(pattern, b_text, char, 1)
        for pattern in patterns
    )


def _squash(text: str) -> str:
    return " ".join(unicodedata.normalize("NFC", text).split())


def _classify_tools(
    a: Request, b: Request, index: int | None, text_kind: str | None
) -> tuple[str, str]:
    names_a, names_b = tool_names(a), tool_names(b)
    if names_a != names_b:
        if sorted(names_a) == sorted(names_b):
            return "tool_order", f"A: {', '.join(names_a)}; B: {', '.join(names_b)}"
        added = sorted(set(names_b) - set(names_a))
        removed = sorted(set(names_a) - set(names_b))
        parts = ([f"added {', '.join(added)}"] if added else []) + (
            [f"removed {', '.join(removed)}"] if removed else []
        )
        return "tool_set", "; ".join(parts) or "tool list changed"
    if index is None or index >= len(a.tools):
        return "tool_definition", ""
    left, right = a.tools[index], b.tools[index]
    name = names_a[index]
    if left == right and orjson.dumps(left) != orjson.dumps(right):
        return "key_order", f"tool {name!r}: same schema, different key order"
    if text_kind in ("whitespace", "clock", "random_id"):
        return text_kind, f"in the definition of tool {name!r}"
    return "tool_definition", f"tool {name!r} changed"


def _classify_message(
    a: Request, b: Request, index: int, normalized: str, text_kind: str | None
) -> tuple[str, str]:
    ma = a.messages[index] if index < len(a.messages) else None
    mb = b.messages[index] if index < len(b.messages) else None
    dropped = _dropped_head(a.messages, b.messages)
    if dropped:
        return "history_truncated", f"{dropped} message(s) dropped from the head of the history"
    if ma is None or mb is None:
        return "history_edit", "the messages before this point differ in number"
    role = ma.get("role")
    lost_reasoning = ma.get("reasoning_content") and not mb.get("reasoning_content")
    if lost_reasoning and {k: v for k, v in ma.items() if k != "reasoning_content"} == mb:
        return "reasoning_dropped", f"messages[{index}] ({role})"
    calls_a, calls_b = ma.get("tool_calls") or [], mb.get("tool_calls") or []
    if calls_a and len(calls_a) == len(calls_b):
        for call, (left, right) in enumerate(zip(calls_a, calls_b, strict=True)):
            if left.get("function") == right.get("function") and left.get("id") != right.get("id"):
                return "tool_call_id", f"{left.get('id')} became {right.get('id')}"
            path = f"messages[{index}].tool_calls[{call}].function.arguments"
            raw_a = get_path(a.raw, _raw_path(a, path))
            raw_b = get_path(b.raw, _raw_path(b, path))
            parsed_a, parsed_b = _parse(raw_a), _parse(raw_b)
            if raw_a != raw_b and parsed_a == parsed_b is not None:
                if _ordered(parsed_a) == _ordered(parsed_b):
                    return "whitespace", "tool-call arguments re-serialized with other spacing"
                return "key_order", "tool-call arguments were re-serialized"
    content_a, content_b = ma.get("content"), mb.get("content")
    if content_a != content_b and _squash(str(content_a)) == _squash(str(content_b)):
        return "whitespace", f"in messages[{index}] ({role})"
    if ma.get("tool_call_id") != mb.get("tool_call_id") and ma.get("content") == mb.get("content"):
        return "tool_call_id", f"{ma.get('tool_call_id')} became {mb.get('tool_call_id')}"
    if text_kind:
        return text_kind, f"in messages[{index}] ({role})"
    if role == "system" or role == "developer":
        return "system_prompt", f"messages[{index}] ({role})"
    last_a = len(a.messages) - 1
    if index < last_a:
        return "history_edit", f"messages[{index}] ({role}) differs; later turns are recomputed"
    return "content", f"messages[{index}] ({role})"


def _raw_path(request: Request, normalized: str) -> str:
    path = request.source_path(normalized)
    return path.removeprefix(request.path_prefix + ".") if request.path_prefix else path


def _ordered(value: Any) -> Any:
    """A JSON value with key order made significant (dicts become lists of pairs)."""
    if isinstance(value, dict):
        return [(key, _ordered(item)) for key, item in value.items()]
    if isinstance(value, list):
        return [_ordered(item) for item in value]
    return value


def _parse(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError:
            return None
    return value


def _dropped_head(messages_a: list[dict], messages_b: list[dict]) -> int:
    """How many leading non-system messages of A are missing from B while the rest continues."""
    start = 1 if messages_a and messages_a[0].get("role") in ("system", "developer") else 0
    body_a, body_b = messages_a[start:], messages_b[start:]
    if start and (not messages_b or messages_b[0] != messages_a[0]):
        return 0
    for dropped in range(1, len(body_a)):
        rest = body_a[dropped:]
        if rest and body_b[: len(rest)] == rest:
            return dropped
    return 0


_RENDERED_PARAMETERS = ("reasoning_effort", "response_format", "tool_choice", "model", "reasoning")


def _parameter_change(a: Request, b: Request) -> str:
    changed = [
        key
        for key in _RENDERED_PARAMETERS
        if a.raw.get(key) != b.raw.get(key) and (key in a.raw or key in b.raw)
    ]
    return ", ".join(f"{key} changed" for key in changed)


def _structural_difference(a: Request, b: Request) -> tuple[str, str] | None:
    if tool_names(a) != tool_names(b):
        return _classify_tools(a, b, None, None)
    dropped = _dropped_head(a.messages, b.messages)
    if dropped:
        return "history_truncated", f"{dropped} message(s) dropped from the head of the history"
    roles_a = [m.get("role") for m in a.messages]
    roles_b = [m.get("role") for m in b.messages]
    if roles_a[: len(roles_b)] != roles_b[: len(roles_a)]:
        return "history_edit", "the message roles differ"
    return None


callable_module(__name__, "diff")  # `pcache.diff(a, b)` is `pcache.api.diff`
