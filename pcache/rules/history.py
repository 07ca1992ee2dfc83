"""How the message history of one request relates to the previous request of its session."""

from __future__ import annotations

from dataclasses import dataclass

from pcache.prompt.request import Request
from pcache.rules.slots import PREFIX_ROLES, history_key


@dataclass(frozen=True, slots=True)
class HistoryChange:
    """`kind`: append (fine), window (head dropped), edit, deletion, insertion, reorder."""

    kind: str
    index: int
    dropped: int = 0


def compare_history(previous: Request, current: Request) -> HistoryChange:
    old = [history_key(m) for m in previous.messages]
    new = [history_key(m) for m in current.messages]
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
