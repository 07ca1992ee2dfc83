"""How the message history of one request relates to the previous request of its session."""

from __future__ import annotations

from dataclasses import dataclass

from pcache.rules.context import LintContext
from pcache.rules.slots import PREFIX_ROLES


@dataclass(frozen=True, slots=True)
class HistoryChange:
    """`kind`: append (fine), window (head dropped), edit, deletion, insertion, reorder."""

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
            ctx.memo["history"] = _compare(ctx.previous.history_keys, ctx.current.history_keys)
    return ctx.memo["history"]


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
