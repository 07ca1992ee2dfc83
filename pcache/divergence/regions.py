"""What changed between two versions of one text: the regions of sentences that differ, and
what kind of value each holds.

A divergence says where two prompts part; the cause is in what changed there. Two system
prompts that differ by an inserted `Current time: ...` line differ by a clock whoever sent
them; two that differ in a `Name: ...` line differ by per-user data. `changed_regions` aligns
the two texts sentence by sentence (lines, and the sentences of a line; difflib, no junk
heuristic) and returns each run that differs, with the equal units around it (the anchors a
fix uses to find the same place in another request); `region_kind` names the values a region
holds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from difflib import SequenceMatcher

from pcache.text.patterns import CHANGING_CLOCK, CHANGING_ID, PERSONAL, values_of

MAX_LINES = 400
"""Lines of each text aligned at most (a system prompt is far shorter; longer texts are compared
as their first lines and the rest as one line)."""


@dataclass(frozen=True, slots=True)
class Region:
    """Characters `[a_offset, a_offset + len(a_text))` of the old text, whole units, became
    `b_text` at `b_offset` of the new one."""

    a_text: str
    b_text: str
    before: str | None
    """The equal unit just before the region, without its line end (None: the region starts
    the text); units compare without the whitespace that ends them."""
    after: str | None
    """The equal unit just after it (None: the region ends the text)."""
    a_offset: int
    """Where the region starts in the old text (characters)."""
    b_offset: int


_UNIT_END = re.compile(r"\n|(?<=[.!?])[ \t]+(?=\S)")
"""Where a unit of text ends: a line end, or the spaces after a sentence's end."""
REACH = 4_000
"""Characters looked back (and ahead) from the changed middle for the unit boundaries around
it; a unit longer than that is aligned as part of the whole texts."""


def lines_of(text: str) -> list[str]:
    """The text's units, lines and the sentences within a line, each with what ends it (so
    that joining them gives the text): a value is moved with its sentence, not its paragraph."""
    lines, start = [], 0
    for end in _UNIT_END.finditer(text):
        lines.append(text[start : end.end()])
        start = end.end()
    if start < len(text):
        lines.append(text[start:])
    if len(lines) > MAX_LINES:
        lines = [*lines[: MAX_LINES - 1], "".join(lines[MAX_LINES - 1 :])]
    return lines


def changed_regions(old: str, new: str) -> list[Region]:
    """The runs of units that differ between `old` and `new`, in order. Only the units from
    the one before the first difference to the one after the last are aligned: a system
    prompt that differs in one sentence costs that sentence, not the prompt."""
    head = _common_head(old, new)
    tail = _common_tail(old, new, min(len(old), len(new)) - head)
    start = _window_start(old, head)
    end_old = _window_end(old, len(old) - tail)
    end_new = end_old + len(new) - len(old)
    if start is None or end_old is None or end_new < start:
        start, end_old, end_new = 0, len(old), len(new)
    a, b = lines_of(old[start:end_old]), lines_of(new[start:end_new])
    starts_a, starts_b = _starts(a), _starts(b)
    keys_a, keys_b = [unit.rstrip() for unit in a], [unit.rstrip() for unit in b]
    regions = []
    matcher = SequenceMatcher(None, keys_a, keys_b, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        before = keys_a[i1 - 1] if i1 > 0 else _unit_before(old, start)
        after = keys_a[i2] if i2 < len(a) else _unit_after(old, end_old)
        regions.append(
            Region(
                "".join(a[i1:i2]),
                "".join(b[j1:j2]),
                before,
                after,
                start + starts_a[i1],
                start + starts_b[j1],
            )
        )
    return regions


def _common_head(a: str, b: str) -> int:
    """The length of the longest common prefix (slices compared in C, halving the range)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        middle = (low + high + 1) // 2
        if a[low:middle] == b[low:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def _common_tail(a: str, b: str, limit: int) -> int:
    low, high = 0, max(limit, 0)
    while low < high:
        middle = (low + high + 1) // 2
        if a[len(a) - middle : len(a) - low] == b[len(b) - middle : len(b) - low]:
            low = middle
        else:
            high = middle - 1
    return low


def _window_start(text: str, position: int) -> int | None:
    """The start of the unit before the one holding `position` (0 near the text's start;
    None when no boundary is within reach)."""
    if position <= 0:
        return 0
    low = max(0, position - REACH)
    ends = [match.end() for match in _UNIT_END.finditer(text, low, position)]
    ends = [end for end in ends if end <= position]
    if len(ends) >= 2:
        return ends[-2]
    return 0 if low == 0 else None


def _window_end(text: str, position: int) -> int | None:
    """The end of the unit after the one holding `position`."""
    if position >= len(text):
        return len(text)
    high = min(len(text), position + REACH)
    ends = [match.end() for match in _UNIT_END.finditer(text, position, high)]
    if len(ends) >= 2:
        return ends[1]
    return len(text) if high == len(text) else None


def _unit_before(text: str, start: int) -> str | None:
    """The unit that ends at `start` (outside the aligned window), without its line end."""
    if start <= 0:
        return None
    ends = [m.end() for m in _UNIT_END.finditer(text, max(0, start - REACH), start)]
    ends = [end for end in ends if end < start]
    return text[ends[-1] if ends else 0 : start].rstrip()


def _unit_after(text: str, end: int) -> str | None:
    if end >= len(text):
        return None
    match = _UNIT_END.search(text, end)
    return text[end : match.end() if match else len(text)].rstrip()


def _starts(lines: list[str]) -> list[int]:
    starts, total = [], 0
    for line in lines:
        starts.append(total)
        total += len(line)
    starts.append(total)
    return starts


def region_at(regions: list[Region], offset_b: int | None) -> Region | None:
    """The region whose new lines hold character `offset_b` of the new text (or the first
    region after it; the first region when no offset is known)."""
    if not regions:
        return None
    if offset_b is None:
        return regions[0]
    for region in regions:
        if offset_b < region.b_offset + max(len(region.b_text), 1):
            return region
    return regions[-1]


def region_kind(region: Region) -> str | None:
    """`clock` or `random_id` when the region's values of that family differ between the two
    sides (one side may have none: an inserted clock line), `per_user` when the region holds
    one person's data (an email, a labelled name or plan), else None."""
    ids = values_of(CHANGING_ID, region.a_text), values_of(CHANGING_ID, region.b_text)
    clocks = values_of(CHANGING_CLOCK, region.a_text), values_of(CHANGING_CLOCK, region.b_text)
    if ids[0] != ids[1] and clocks[0] == clocks[1]:
        return "random_id"
    if clocks[0] != clocks[1]:
        return "clock"
    if ids[0] != ids[1]:
        return "random_id"
    if PERSONAL.search(region.a_text) or PERSONAL.search(region.b_text):
        return "per_user"
    return None
