"""The causes of a divergence: what each means and what to do about it.

A cause either names a defect that one lint rule reports (the rule module declares it in its
`CAUSES`; `pcache.rules.RULE_FOR_CAUSE` holds the mapping) or is `NEUTRAL`: nothing an
application could have done differently (new content, a deliberate cache salt, an extension).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class CauseKind:
    summary: str
    hint: str


CAUSES: dict[str, CauseKind] = {
    "identical": CauseKind(
        "the rendered prompts are identical",
        "Nothing to fix: B reuses everything a cache can reuse.",
    ),
    "append": CauseKind(
        "B extends A: A's whole prompt is a prefix of B's",
        "Nothing to fix: B extends A, so A's prefix is reused (append-only history).",
    ),
    "cache_salt": CauseKind(
        "same tokens, but a different cache salt",
        "The requests use different cache salts, which isolates their caches on purpose.",
    ),
    "content": CauseKind(
        "the content changed",
        "The requests differ here; everything after this point is recomputed.",
    ),
    "token_ids": CauseKind(
        "the token ids differ",
        "The token ids differ here; everything after this point is recomputed.",
    ),
    "clock": CauseKind(
        "a clock value changed",
        "Move the clock value out of the prefix: into the newest user turn or request"
        " metadata, or round it to the day.",
    ),
    "random_id": CauseKind(
        "a random id changed",
        "Drop per-request ids from the prompt, or move them to metadata or headers.",
    ),
    "per_user": CauseKind(
        "a per-user value sits in the shared prefix",
        "Move per-user data (names, ids, profiles, memories) after the shared part: into the"
        " first user turn, or behind a tool.",
    ),
    "system_prompt": CauseKind(
        "the system prompt changed within the conversation",
        "Keep the system prompt static; put per-request content in later turns.",
    ),
    "fewshot_order": CauseKind(
        "few-shot examples were reordered or resampled",
        "Pin the example set and its order.",
    ),
    "whitespace": CauseKind(
        "only whitespace or Unicode normalization differs",
        "Normalize whitespace and line endings once, before the text enters a prompt.",
    ),
    "image": CauseKind(
        "an image of the history changed (URL, bytes or detail)",
        "Send each image exactly as it was first sent: the same bytes or a stable URL.",
    ),
    "key_order": CauseKind(
        "the same JSON schema was serialized with a different key order",
        "Serialize the JSON you write deterministically (sorted keys).",
    ),
    "arguments_reserialized": CauseKind(
        "tool-call arguments were re-serialized",
        "Replay the model's own tool-call arguments byte for byte, never re-dumped.",
    ),
    "tool_result_reserialized": CauseKind(
        "a tool result was re-serialized",
        "Store each tool result as the exact string first sent, and send that string again.",
    ),
    "number_format": CauseKind(
        "the same numbers were written another way",
        "Format numbers once, when the message is first written, and keep that text.",
    ),
    "tool_order": CauseKind(
        "the same tools are sent in a different order",
        "Send tools in a stable order (e.g. sorted by name after merging MCP servers).",
    ),
    "tool_set": CauseKind(
        "the set of tools changed",
        "Send the full tool set every time and restrict per call with tool_choice /"
        " allowed_tools instead of adding or removing tools.",
    ),
    "tool_definition": CauseKind(
        "a tool definition changed",
        "Keep tool descriptions and schemas static; move changing values into messages.",
    ),
    "tool_call_id": CauseKind(
        "a historical tool-call id was regenerated",
        "Persist tool-call ids with the history instead of regenerating them.",
    ),
    "history_edit": CauseKind(
        "an earlier message was edited",
        "Keep history append-only: add new messages instead of editing old ones.",
    ),
    "history_truncated": CauseKind(
        "old messages were dropped from the head of the history",
        "Drop old messages in large strides (or compact rarely) instead of sliding the window"
        " every turn.",
    ),
    "compaction": CauseKind(
        "earlier messages were summarized or clipped",
        "Clip outputs once when first added; compact rarely, in large steps.",
    ),
    "reasoning_dropped": CauseKind(
        "an assistant turn lost its reasoning on replay",
        "Replay the assistant's reasoning with its turn, as it was generated.",
    ),
    "system_message_moved": CauseKind(
        "a system message after the first turn was moved or re-injected",
        "Keep one static system prompt; put per-turn guidance in the newest user turn.",
    ),
    "template": CauseKind(
        "the chat template wrote different text for the same messages",
        "The template renders a turn differently once it is history: use its flags (e.g."
        " preserve_thinking) or a template that renders history as it was generated.",
    ),
    "parameter": CauseKind(
        "a request parameter that the template renders changed",
        "Keep request parameters that the template renders (reasoning effort, response"
        " format, tool_choice) stable within a session.",
    ),
}

NEUTRAL = frozenset({"identical", "append", "cache_salt", "content", "token_ids"})
"""Causes that no rule reports: what they lose, no earlier request could have supplied."""

RULE_OF_CAUSE: dict[str, tuple[str, str]] = {
    "clock": ("PC101", "clock-in-prefix"),
    "random_id": ("PC103", "random-id-in-prefix"),
    "per_user": ("PC104", "per-user-in-shared-prefix"),
    "fewshot_order": ("PC106", "fewshot-reordered"),
    "whitespace": ("PC107", "whitespace-drift"),
    "image": ("PC108", "image-instability"),
    "system_prompt": ("PC109", "system-prompt-changed"),
    "key_order": ("PC201", "unsorted-schema-keys"),
    "arguments_reserialized": ("PC202", "reserialized-tool-arguments"),
    "tool_result_reserialized": ("PC203", "tool-result-reserialized"),
    "number_format": ("PC204", "number-formatting-drift"),
    "tool_order": ("PC301", "tool-order-changed"),
    "tool_set": ("PC302", "tool-set-changed"),
    "tool_definition": ("PC303", "tool-definition-drift"),
    "tool_call_id": ("PC304", "tool-call-id-regenerated"),
    "history_edit": ("PC401", "history-not-append-only"),
    "history_truncated": ("PC402", "sliding-window"),
    "compaction": ("PC403", "compaction-or-clipping"),
    "reasoning_dropped": ("PC404", "reasoning-dropped"),
    "template": ("PC405", "template-non-append-only"),
    "system_message_moved": ("PC406", "system-message-mid-history"),
    "parameter": ("PC509", "openai-param-change"),
}
"""The lint rule (code, name) that reports each cause NEUTRAL leaves out, as the rule modules
declare it in their `CAUSES`: `pcache diff` names the rule without loading the rules, and
`pcache.rules` checks, as it loads, that this table and the modules agree."""


def rule_of(kind: str) -> dict[str, str] | None:
    """The lint rule a divergence cause breaks, as `{"code", "name"}` (None: a neutral cause)."""
    rule = RULE_OF_CAUSE.get(kind)
    return None if rule is None else {"code": rule[0], "name": rule[1]}
