"""Undoing a change in a token sequence: the splice that lets the rest realign with an earlier
prompt, and the edits that map positions of the edited sequence back to the one sent."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pcache.prefix import common_run_length

if TYPE_CHECKING:
    from pcache.rules.base import Rule

ANCHOR = 8
"""Tokens of the earlier prompt that must reappear in the request for the rest to realign."""


def splice(
    reference: Sequence[int], tokens: Sequence[int], start: int, end: int, reference_end: int
):
    """Undo the change at `start`, which lies in `tokens[start:end]` and, in the reference, in
    `reference[start:reference_end]`: `(spliced, a, b)` with
    `spliced = tokens[:start] + reference[start:start+a] + tokens[start+b:]`,
    `start + b <= end` and `start + a <= reference_end`, where the rest of the reference
    realigns so that `spliced` shares the longest prefix with it; None when nothing of the
    reference after `start` reappears there."""
    if start >= len(reference):
        return None
    width = min(ANCHOR, len(reference) - start)
    last = min(end, len(tokens) - width)
    best = None
    a = start
    while a <= reference_end and a + width <= len(reference):
        b = _find(tokens, reference[a : a + width], start, last)
        if b is None:
            a += 1
            continue
        matched = common_run_length(reference, a, tokens, b)
        if best is None or a + matched > best[0]:
            best = (a + matched, a - start, b - start)
            if a + matched == len(reference):
                break  # realigned to the reference's end: nothing can share more
        a += max(matched, 1)
    if best is None:
        return None
    _, taken, dropped = best
    spliced = [*tokens[:start], *reference[start : start + taken], *tokens[start + dropped :]]
    return spliced, taken, dropped


def _find(tokens: Sequence[int], anchor: Sequence[int], low: int, high: int) -> int | None:
    """First `b` in `[low, high]` where `tokens[b:]` starts with `anchor`."""
    width, head = len(anchor), anchor[0]
    position = low
    while position <= high:
        try:
            position = tokens.index(head, position, high + 1)
        except ValueError:
            return None
        if tokens[position : position + width] == anchor:
            return position
        position += 1
    return None


@dataclass(frozen=True, slots=True)
class Edit:
    """Tokens `[start, start + taken)` of an edited prompt replace `dropped` tokens of the
    prompt before this edit (positions in the prompt as edited so far)."""

    start: int
    taken: int
    dropped: int
    rule: Rule | None = None
    """The rule whose divergence this edit undid."""
    origin: int | None = None
    """The request (its number) whose finding undid it first."""


def to_original(edits: Sequence[Edit], position: int) -> int | None:
    """Where `position` of the edited prompt was in the prompt as sent (inside a splice: where
    the spliced change began)."""
    for edit in reversed(edits):
        if position < edit.start:
            continue
        if position < edit.start + edit.taken:
            position = edit.start
            continue
        position += edit.dropped - edit.taken
    return position


def from_original(edits: Sequence[Edit], position: int) -> int:
    """Where token `position` of the prompt as sent is after `edits` (a splice's end if it
    fell inside one)."""
    for edit in edits:
        if position < edit.start:
            continue
        if position < edit.start + edit.dropped:
            position = edit.start + edit.taken
        else:
            position += edit.taken - edit.dropped
    return position


def apply(tokens: Sequence[int], edits: Sequence[Edit], taken: Sequence[tuple[int, ...]]):
    result = list(tokens)
    for edit, put in zip(edits, taken, strict=True):
        result[edit.start : edit.start + edit.dropped] = put
    return result
