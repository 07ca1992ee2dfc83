"""How the message history of one request relates to the previous request of its session."""

from __future__ import annotations

from dataclasses import dataclass

from pcache.rules.context import LintContext
from pcache.rules.slots import PREFIX_ROLES


@dataclass(frozen=True, slots=True)
class HistoryChange:
    """`kind`: append (fine), window (head dropped), compaction (several messages replaced by
    one), clipping (a message shortened in place), system-injection (system messages moved or
    re-injected mid-history), edit, deletion, insertion, reorder."""

    kind: str
    index: int
    dropped: int = 0


def compare_history(ctx: LintContext) -> HistoryChange:
    """How the current request's history relates to the previous one's (computed once)."""
    assert ctx.previous is not None
    if "history" not in ctx.memo:
        old, new = ctx.previous.messages, ctx.current.messages
        if new[: len(old)] == old:  # the common case, compared at C speed
            ctx.memo["history"] = HistoryChange("append", len(old))
        else:
            ctx.memo["history"] = _classify(
                ctx.previous.history_keys, ctx.current.history_keys, old, new
            )
    return ctx.memo["history"]


def _classify(old: list[tuple], new: list[tuple], old_messages, new_messages) -> HistoryChange:
    change = _compare(old, new)
    if change.kind in ("append", "window"):
        return change
    injected = _system_injection(old, new)
    if injected is not None:
        return injected
    index = change.index
    if change.kind in ("edit", "deletion") and index < len(new):
        tail = len(old) - index
        for collapsed in range(2, tail):  # messages index..index+collapsed-1 became one
            rest = old[index + collapsed :]
            if new[index + 1 : index + 1 + len(rest)] == rest:
                return HistoryChange("compaction", index, collapsed)
    if (
        change.kind == "edit"
        and index < len(new)
        and _clipped(old, new, index, old_messages, new_messages)
    ):
        return HistoryChange("clipping", index)
    return change


CLIP_MARKERS = ("truncated", "clipped", "omitted", "[...]", "…", "...")


def _clipped(old, new, index, old_messages, new_messages) -> bool:
    if old[index][0] != new[index][0] or old[index + 1 :] != new[index + 1 : len(old)]:
        return False
    before, after = old_messages[index].get("content"), new_messages[index].get("content")
    if not isinstance(before, str) or not isinstance(after, str) or len(after) >= len(before):
        return False
    kept = after.rstrip()
    for marker in CLIP_MARKERS:
        kept = kept.removesuffix(marker).rstrip()
    return (len(kept) > 0 and before.startswith(kept)) or any(m in after for m in CLIP_MARKERS)


def _system_injection(old: list[tuple], new: list[tuple]) -> HistoryChange | None:
    """Old and new differ only in where system/developer messages after the first turn sit
    (an old one moved, replaced or removed)."""

    def strip(keys: list[tuple]) -> list[tuple]:
        head = 0
        while head < len(keys) and keys[head][0] in PREFIX_ROLES:
            head += 1
        return keys[:head] + [key for key in keys[head:] if key[0] not in PREFIX_ROLES]

    old_core, new_core = strip(old), strip(new)
    if len(old_core) == len(old):
        return None  # no system message to move: a new one in the middle is an insertion
    if new_core[: len(old_core)] != old_core:
        return None
    index = next(i for i in range(len(old)) if i >= len(new) or old[i] != new[i])
    return HistoryChange("system-injection", index)


def _compare(old: list[tuple], new: list[tuple]) -> HistoryChange:
    if new[: len(old)] == old:
        return HistoryChange("append", len(old))
    head = 0
    while head < len(old) and old[head][0] in PREFIX_ROLES:
        head += 1
    index = next(i for i in range(len(old)) if i >= len(new) or old[i] != new[i])
    if index >= head:
        for dropped in range(1, len(old) - head):
            rest = old[head + dropped :]
            if new[head : head + len(rest)] == rest and len(new) > head + len(rest) - 1:
                return HistoryChange("window", head, dropped)
    if index < len(new) and old[index + 1 :] == new[index : index + len(old) - index - 1]:
        return HistoryChange("deletion", index)
    if index < len(new) and new[index + 1 : index + 1 + len(old) - index] == old[index:]:
        return HistoryChange("insertion", index)
    if sorted(old[index:]) == sorted(new[index : len(old)]):
        return HistoryChange("reorder", index)
    return HistoryChange("edit", index)
