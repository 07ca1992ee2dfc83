"""Where two rendered prompts part, and why: the one classifier of a lost prefix.

`explain(a, b, token_a, token_b)` takes an earlier prompt A and a later prompt B whose token
streams agree up to `token_a` in A and `token_b` in B (the same position when B is compared
with A from the start; different positions once earlier changes of B were undone), finds the
first differing character there, and names the cause from the requests' structure and the text
on both sides. It also says how far the changed unit reaches on each side (a message, a tool,
the tool list), which is what undoing the change replaces.

`same_conversation` says whether B continues A's conversation (`continued`: B is known to go on
after all of A's messages, as a session's next request does): a changed message of the history
is an edit only then; between two conversations the messages are simply their own, and only the
shared part (system prompt, tools, parameters) can hold a defect: a clock, an id, per-user data.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass
from typing import Any

import orjson

from pcache.divergence.causes import CAUSES
from pcache.divergence.fewshot import fewshot_change, paragraphs
from pcache.divergence.history import (
    PREFIX_ROLES,
    canonical_text,
    compare_messages,
    normalize_numbers,
    prefix_count,
    squash,
    tool_function,
)
from pcache.divergence.regions import changed_regions, region_at, region_kind
from pcache.prompt.renderers.rendered import RenderedPrompt
from pcache.prompt.shapes.reasoning import REASONING_KEYS
from pcache.prompt.shapes.request import KIND_TOKEN_IDS, Request, tool_names
from pcache.text.jsonpath import get_path, head
from pcache.text.patterns import CHANGING_CLOCK, CHANGING_ID, value_at
from pcache.text.prefix import common_run_length
from pcache.text.redaction import quote, shown

EXCERPT_BEFORE = 32
EXCERPT_AFTER = 48
PER_USER_LIMIT = 400
"""A per-user value is a small part of a shared text (a name, a profile); a larger change is
another prompt altogether."""
PER_USER_SHARED_AFTER = 40
"""Shared characters that must follow text inserted into a shared prompt for it to count as a
per-user value (text added at the end is just a longer prompt)."""
TEMPLATE_REACH = 400
"""Characters a template-written difference may take to realign."""


@dataclass(slots=True)
class Cause:
    """Why the prefix breaks: where in each request, what the text looks like, and a class.

    `rule`: the lint rule this cause breaks (`{"code", "name"}`), None for neutral causes.
    """

    kind: str
    a_path: str | None
    b_path: str | None
    a_excerpt: str
    b_excerpt: str
    summary: str
    hint: str
    detail: str = ""
    rule: dict[str, str] | None = None


@dataclass(slots=True)
class Divergence:
    """A classified divergence and the extent of the changed unit in each prompt (tokens)."""

    cause: Cause
    a_char: int | None
    b_char: int | None
    a_end: int
    """A's tokens up to here belong to the changed unit (what undoing B's change restores)."""
    b_end: int
    a_value: str = ""
    """A few characters of each side from the first difference on (for messages)."""
    b_value: str = ""
    b_unit: str | None = None
    """The normalized path of the changed unit in B (a message, a tool, `tools`)."""


def make_cause(kind, a_path, b_path, a_excerpt, b_excerpt, detail: str = "") -> Cause:
    """The cause of `kind` (the excerpts as their shapes under `--redact`)."""
    about = CAUSES[kind]
    a_excerpt, b_excerpt = shown(a_excerpt), shown(b_excerpt)
    return Cause(kind, a_path, b_path, a_excerpt, b_excerpt, about.summary, about.hint, detail)


def explain(
    a: RenderedPrompt,
    b: RenderedPrompt,
    token_a: int,
    token_b: int | None = None,
    same_conversation: bool = True,
    continued: bool = False,
) -> Divergence:
    """The classified divergence of B from A after their shared `token_a` / `token_b` tokens."""
    token_b = token_a if token_b is None else token_b
    if a.request.kind == KIND_TOKEN_IDS or b.request.kind == KIND_TOKEN_IDS:
        ended = token_a >= a.num_tokens or token_b >= b.num_tokens
        cause = make_cause(
            "append" if ended else "token_ids",
            a.token_path(token_a),
            b.token_path(token_b),
            str(a.token_ids[max(0, token_a - 4) : token_a + 4]),
            str(b.token_ids[max(0, token_b - 4) : token_b + 4]),
        )
        return Divergence(cause, None, None, a.num_tokens, b.num_tokens)
    char_a, char_b = a.token_char(token_a), b.token_char(token_b)
    shared = common_run_length(a.text, char_a, b.text, char_b)
    char_a, char_b = char_a + shared, char_b + shared
    excerpts = (_excerpt(a.text, char_a), _excerpt(b.text, char_b))
    if char_a >= len(a.text) or token_a >= a.num_tokens:
        cause = make_cause("append", None, b.path_at(char_b), *excerpts)
        return Divergence(cause, char_a, char_b, a.num_tokens, token_b)
    span_a, span_b = a.span_at(char_a), b.span_at(char_b)
    kind, detail, unit = _classify(
        a, b, char_a, char_b, span_a, span_b, same_conversation, continued
    )
    cause = make_cause(
        kind, span_a.path if span_a else None, span_b.path if span_b else None, *excerpts, detail
    )
    a_end = _unit_end(a, char_a, unit, "a")
    b_end = _unit_end(b, char_b, unit, "b")
    a_value, b_value = _values(a.text, char_a, b.text, char_b)
    b_unit = unit[1].removesuffix("..") if unit[1] else None
    return Divergence(cause, char_a, char_b, a_end, b_end, a_value, b_value, b_unit)


def _values(a_text: str, char_a: int, b_text: str, char_b: int) -> tuple[str, str]:
    """Each side's differing middle from the first difference, with a little context."""
    end_a, end_b = min(len(a_text), char_a + 80), min(len(b_text), char_b + 80)
    while end_a > char_a and end_b > char_b and a_text[end_a - 1] == b_text[end_b - 1]:
        end_a, end_b = end_a - 1, end_b - 1
    before = 6
    return (
        a_text[max(0, char_a - before) : max(end_a, char_a + 1) + 4],
        b_text[max(0, char_b - before) : max(end_b, char_b + 1) + 4],
    )


def _excerpt(text: str, char: int) -> str:
    return text[max(0, char - EXCERPT_BEFORE) : char + EXCERPT_AFTER]


# -- the extent of a changed unit -------------------------------------------------------------

Unit = tuple[str | None, str | None]
"""The normalized path of the changed unit in A and in B (None: template text near the char),
each possibly ending with `..` for "this element and everything after it in its list"."""


def _unit_end(rendered: RenderedPrompt, char: int, unit: Unit, side: str) -> int:
    path = unit[0] if side == "a" else unit[1]
    end = None
    if path is not None:
        rest = path.endswith("..")
        path = path.removesuffix("..")
        ends = [s.end for s in rendered.spans if _under(s.normalized, path, rest)]
        end = max(ends) if ends else None
    if end is None or end <= char:
        end = char + TEMPLATE_REACH
    end = min(end, len(rendered.text))
    return min(rendered.num_tokens, bisect_left(rendered.token_starts, end) + 1)


def _under(normalized: str, path: str, rest: bool) -> bool:
    if normalized == path or normalized.startswith((path + ".", path + "[")):
        return True
    if not rest:
        return False
    key, index = head(path)
    other_key, other_index = head(normalized)
    return (
        key == other_key
        and index is not None
        and other_index is not None
        and (other_index >= index)
    )


# -- the classifier -------------------------------------------------------------------------


def _classify(
    a, b, char_a, char_b, span_a, span_b, same_conversation, continued=False
) -> tuple[str, str, Unit]:
    ra, rb = a.request, b.request
    norm_a = span_a.normalized if span_a else None
    norm_b = span_b.normalized if span_b else None
    if norm_a is None and norm_b is None:
        return _template_text(ra, rb, same_conversation)
    key_a, index_a = head(norm_a) if norm_a else (None, None)
    key_b, index_b = head(norm_b) if norm_b else (None, None)
    key = key_a or key_b
    if key in RENDERED_PARAMETERS:
        return "parameter", _parameter_change(ra, rb) or f"{key} changed", (norm_a, norm_b)
    if key == "tools" or (key_a != key_b and "tools" in (key_a, key_b)):
        return _classify_tools(
            ra, rb, a.text, char_a, b.text, char_b, index_a, index_b, same_conversation
        )
    if key == "messages":
        offset_b = char_b - span_b.start if span_b and norm_b.endswith(".content") else None
        return _classify_messages(
            ra,
            rb,
            a.text,
            char_a,
            b.text,
            char_b,
            index_a,
            index_b,
            same_conversation,
            offset_b,
            continued,
        )
    kind = _text_kind(a.text, char_a, b.text, char_b) or "content"
    return kind, "", (norm_a, norm_b)


def _text_kind(a_text: str, char_a: int, b_text: str, char_b: int) -> str | None:
    """A clock, an id or whitespace at the first differing character, from the text alone."""
    if value_at(CHANGING_CLOCK, a_text, char_a, b_text, char_b):
        return "clock"
    if value_at(CHANGING_ID, a_text, char_a, b_text, char_b):
        return "random_id"
    at_space = a_text[char_a : char_a + 1].isspace() or b_text[char_b : char_b + 1].isspace()
    if at_space:
        left = squash(a_text[char_a : char_a + 200])
        right = squash(b_text[char_b : char_b + 200])
        keep = min(len(left), len(right)) - 16
        if keep > 0 and left[:keep] == right[:keep]:
            return "whitespace"
    return None


def _template_text(ra: Request, rb: Request, same_conversation: bool) -> tuple[str, str, Unit]:
    """A difference in text the template wrote: a parameter it renders, a structural change
    it renders around, or the template itself."""
    parameter = _parameter_change(ra, rb)
    if parameter:
        return "parameter", parameter, (None, None)
    if tool_names(ra) != tool_names(rb):
        kind, detail = _tool_list_change(ra, rb)
        return kind, detail, ("tools", "tools")
    if same_conversation:
        change = compare_messages(ra.messages, rb.messages)
        kind = _HISTORY_KINDS.get(change.kind)
        if kind is not None:
            at = f"messages[{change.index}]"
            return kind, _history_detail(change), (at + "..", at)
    return "template", "", (None, None)


RENDERED_PARAMETERS = ("reasoning_effort", "response_format", "tool_choice", "model", "reasoning")
"""Request parameters that chat templates render into the prompt."""


def _parameter_change(a: Request, b: Request) -> str:
    changed = [
        key
        for key in RENDERED_PARAMETERS
        if a.raw.get(key) != b.raw.get(key) and (key in a.raw or key in b.raw)
    ]
    return ", ".join(f"{key} changed" for key in changed)


# -- tools ----------------------------------------------------------------------------------


def _tool_list_change(a: Request, b: Request) -> tuple[str, str]:
    names_a, names_b = tool_names(a), tool_names(b)
    if sorted(names_a) == sorted(names_b):
        return "tool_order", f"A: {_names(names_a)}; B: {_names(names_b)}"
    added = sorted(set(names_b) - set(names_a))
    removed = sorted(set(names_a) - set(names_b))
    parts = ([f"added {_names(added)}"] if added else []) + (
        [f"removed {_names(removed)}"] if removed else []
    )
    return "tool_set", "; ".join(parts) or "tool list changed"


def _names(names: list[str]) -> str:
    return ", ".join(shown(name) for name in names)


def _classify_tools(a, b, a_text, char_a, b_text, char_b, index_a, index_b, same_conversation):
    names_a, names_b = tool_names(a), tool_names(b)
    if names_a != names_b:
        kind = _text_kind(a_text, char_a, b_text, char_b)
        if kind in ("clock", "random_id") and len(names_a) == len(names_b):
            return kind, "in a tool name", ("tools", "tools")
        if not same_conversation and (
            not set(names_a) & set(names_b) or prefix_messages(a) != prefix_messages(b)
        ):
            return "content", "another application's tools", ("tools", "tools")
        kind, detail = _tool_list_change(a, b)
        return kind, detail, ("tools", "tools")
    index = index_a if index_a is not None else index_b
    if index is None or index >= len(a.tools):
        return "tool_definition", "", ("tools", "tools")
    unit = (f"tools[{index}]", f"tools[{index}]")
    left, right = a.tools[index], b.tools[index]
    name = tool_names(a)[index]
    if left == right and orjson.dumps(left) != orjson.dumps(right):
        return "key_order", f"tool {quote(name)}: same schema, different key order", unit
    kind = _text_kind(a_text, char_a, b_text, char_b) or definition_kind(left, right)
    if kind is not None:
        return kind, f"in the definition of tool {quote(name)}", unit
    return "tool_definition", f"tool {quote(name)} changed", unit


def definition_kind(left: dict, right: dict) -> str | None:
    """A clock or an id that changed in a tool's description (the changed text's values)."""
    old = tool_function(left).get("description")
    new = tool_function(right).get("description")
    if not isinstance(old, str) or not isinstance(new, str) or old == new:
        return None
    region = region_at(changed_regions(old, new), None)
    kind = region_kind(region) if region is not None else None
    return kind if kind in ("clock", "random_id") else None


# -- messages -------------------------------------------------------------------------------

_HISTORY_KINDS = {
    "window": "history_truncated",
    "compaction": "compaction",
    "clipping": "compaction",
    "system-injection": "system_message_moved",
    "edit": "history_edit",
    "deletion": "history_edit",
    "insertion": "history_edit",
    "reorder": "history_edit",
}


def _history_detail(change) -> str:
    if change.kind == "window":
        return f"{change.dropped} message(s) dropped from the head of the history"
    if change.kind == "compaction":
        return f"{change.dropped} messages from message {change.index} on were replaced by one"
    if change.kind == "clipping":
        return f"message {change.index} was clipped"
    return f"messages[{change.index}] {change.kind}"


def _classify_messages(
    a,
    b,
    a_text,
    char_a,
    b_text,
    char_b,
    index_a,
    index_b,
    same_conversation,
    offset_b=None,
    continued=False,
) -> tuple[str, str, Unit]:
    index = index_a if index_a is not None else index_b
    index_a = index if index_a is None else index_a
    index_b = index if index_b is None else index_b
    at_a, at_b = f"messages[{index_a}]", f"messages[{index_b}]"
    unit: Unit = (at_a, at_b)
    ma = a.messages[index_a] if index_a is not None and index_a < len(a.messages) else None
    mb = b.messages[index_b] if index_b is not None and index_b < len(b.messages) else None
    prefix = _is_prefix_message(a, index_a) or _is_prefix_message(b, index_b)
    if prefix and ma is not None and mb is not None:
        return _classify_prefix_message(
            ma, mb, a_text, char_a, b_text, char_b, index, same_conversation, unit, offset_b
        )
    retry = _is_newest_turn(a, index_a) and (not continued or _is_retry(a, b, index_a, index_b))
    if not same_conversation or retry:
        return "content", "", unit  # another conversation, or a retry of A's newest turn
    change = compare_messages(a.messages, b.messages)
    if change.kind in ("window", "compaction", "clipping", "system-injection"):
        at = f"messages[{change.index}]"
        reach = (at + "..", at) if change.kind != "clipping" else (at, at)
        return _HISTORY_KINDS[change.kind], _history_detail(change), reach
    if ma is None or mb is None:
        return "history_edit", "the messages before this point differ in number", unit
    specific = _message_change(a, b, ma, mb, index, a_text, char_a, b_text, char_b)
    if specific is not None:
        return (*specific, unit)
    if change.kind in _HISTORY_KINDS:
        return _HISTORY_KINDS[change.kind], _history_detail(change), (at_a + "..", at_b)
    return "history_edit", f"messages[{index}] ({ma.get('role')}) differs", unit


def prefix_messages(request: Request) -> list[dict[str, Any]]:
    """The system and developer messages ahead of the first turn."""
    return request.messages[: prefix_count(request.messages)]


def _is_newest_turn(request: Request, index: int) -> bool:
    """Message `index` is the request's newest user turn (or after it)."""
    users = [i for i, m in enumerate(request.messages) if m.get("role") == "user"]
    return bool(users) and index >= users[-1]


def _is_retry(a: Request, b: Request, index_a: int | None, index_b: int | None) -> bool:
    """B asks A's newest question again, another way: the changed message is the newest user
    message of both (B goes on after A's turn otherwise: an agent's tool calls and results
    are history once B repeats them)."""

    def last_user(request: Request) -> int | None:
        users = [i for i, m in enumerate(request.messages) if m.get("role") == "user"]
        return users[-1] if users else None

    return index_a == last_user(a) and index_b == last_user(b)


def _is_prefix_message(request: Request, index: int | None) -> bool:
    """A system or developer message ahead of the first turn (what every request repeats)."""
    if index is None or index >= len(request.messages):
        return False
    return all(m.get("role") in PREFIX_ROLES for m in request.messages[: index + 1])


def _classify_prefix_message(
    ma, mb, a_text, char_a, b_text, char_b, index, same_conversation, unit, offset_b=None
) -> tuple[str, str, Unit]:
    """A system or developer message ahead of the first turn: the cause is what changed in
    it (the changed lines), whichever request it is compared with."""
    role = mb.get("role")
    where = f"messages[{index}] ({role})"
    old, new = ma.get("content"), mb.get("content")
    if isinstance(old, str) and isinstance(new, str) and squash(old) == squash(new):
        return "whitespace", f"in {where}", unit
    kind = _text_kind(a_text, char_a, b_text, char_b)
    if kind in ("clock", "random_id"):
        return kind, f"in {where}", unit
    if isinstance(old, str) and isinstance(new, str):
        region = region_at(changed_regions(old, new), offset_b)
        changed = region_kind(region) if region is not None else None
        if changed in ("clock", "random_id"):
            return changed, f"in {where}", unit
        if changed == "per_user" and (not same_conversation or small_change(old, new)):
            return "per_user", f"in {where}", unit
    if kind is not None:
        return kind, f"in {where}", unit
    if isinstance(old, str) and isinstance(new, str):
        if normalize_numbers(old) == normalize_numbers(new):
            return "number_format", f"in {where}", unit
        change = fewshot_change(paragraphs(old), paragraphs(new))
        if change is not None:
            return "fewshot_order", f"examples {change[1]} at paragraph {change[0]}", unit
        if not same_conversation and small_change(old, new):
            return "per_user", f"in {where}", unit
    elif not same_conversation:
        return "per_user", f"in {where}", unit
    if not same_conversation:
        return "content", f"{where}: another system prompt", unit
    return "system_prompt", where, unit


def small_change(old: str, new: str) -> bool:
    """The texts differ in a part small next to what they share (a value, not a new prompt)."""
    start = 0
    limit = min(len(old), len(new))
    while start < limit and old[start] == new[start]:
        start += 1
    end = 0
    while end < limit - start and old[-1 - end] == new[-1 - end]:
        end += 1
    if start + end >= min(len(old), len(new)) and end < PER_USER_SHARED_AFTER:
        return False  # one text extends the other at its end: an addition, not a value
    changed = max(len(old), len(new)) - start - end
    return changed <= PER_USER_LIMIT and changed <= (start + end)


def _message_change(a, b, ma, mb, index, a_text, char_a, b_text, char_b) -> tuple[str, str] | None:
    """A cause more specific than an edit, for message `index` of the history."""
    role = ma.get("role")
    where = f"messages[{index}] ({role})"
    for key in REASONING_KEYS:
        if ma.get(key) and not mb.get(key):
            rest = {k: v for k, v in ma.items() if k != key}
            if rest == {k: v for k, v in mb.items() if k != key}:
                return "reasoning_dropped", f"{where} lost its {key}"
    calls_a, calls_b = ma.get("tool_calls") or [], mb.get("tool_calls") or []
    if calls_a and len(calls_a) == len(calls_b):
        for call, (left, right) in enumerate(zip(calls_a, calls_b, strict=True)):
            if left.get("function") == right.get("function") and left.get("id") != right.get("id"):
                return "tool_call_id", f"{left.get('id')} became {right.get('id')}"
            path = f"messages[{index}].tool_calls[{call}].function.arguments"
            raw_a, raw_b = get_path(a.raw, _raw_path(a, path)), get_path(b.raw, _raw_path(b, path))
            parsed_a, parsed_b = _parse(raw_a), _parse(raw_b)
            if raw_a != raw_b and parsed_a == parsed_b is not None:
                return "arguments_reserialized", "tool-call arguments were re-serialized"
    if ma == mb:
        return "template", f"{where} is unchanged; the template renders it differently"
    if ma.get("tool_call_id") != mb.get("tool_call_id") and ma.get("content") == mb.get("content"):
        return "tool_call_id", f"{ma.get('tool_call_id')} became {mb.get('tool_call_id')}"
    content_a, content_b = ma.get("content"), mb.get("content")
    images = _has_image(content_a) or _has_image(content_b)
    if images and _text_parts(content_a) == _text_parts(content_b):
        return "image", f"an image of {where} changed"
    if isinstance(content_a, str) and isinstance(content_b, str) and content_a != content_b:
        if squash(content_a) == squash(content_b):
            return "whitespace", f"in {where}"
        same_value = role == "tool" and canonical_text(content_a) == canonical_text(content_b)
        if same_value and normalize_numbers(content_a) != normalize_numbers(content_b):
            return "tool_result_reserialized", f"{where}: the same JSON written again"
        if normalize_numbers(content_a) == normalize_numbers(content_b):
            return "number_format", f"in {where}"
    kind = _text_kind(a_text, char_a, b_text, char_b)
    if kind in ("clock", "random_id"):
        return kind, f"in {where}"
    return None


def _has_image(content: Any) -> bool:
    return isinstance(content, list) and any(
        isinstance(part, dict) and part.get("type") in ("image_url", "image", "input_image")
        for part in content
    )


def _text_parts(content: Any) -> list[Any]:
    if not isinstance(content, list):
        return [content]
    return [
        part
        for part in content
        if not (
            isinstance(part, dict) and part.get("type") in ("image_url", "image", "input_image")
        )
    ]


def _raw_path(request: Request, normalized: str) -> str:
    path = request.source_path(normalized)
    return path.removeprefix(request.path_prefix + ".") if request.path_prefix else path


def _parse(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError:
            return None
    return value
