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

from pcache.patterns import CHANGING_CLOCK, CHANGING_ID, PERSONAL, values_of

MAX_LINES = 400
"""Lines of each text aligned at most (a system prompt is far shorter; longer texts are compared
as their first lines and the rest as one line)."""


@dataclass(frozen=True, slots=True)
class Region:
    """Lines `[a_start, a_end)` of the old text became lines `[b_start, b_end)` of the new."""

    a_start: int
    a_end: int
    b_start: int
    b_end: int
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
    """The runs of lines that differ between `old` and `new`, in order."""
    a, b = lines_of(old), lines_of(new)
    starts_a, starts_b = _starts(a), _starts(b)
    keys_a, keys_b = [unit.rstrip() for unit in a], [unit.rstrip() for unit in b]
    regions = []
    matcher = SequenceMatcher(None, keys_a, keys_b, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        before = keys_a[i1 - 1] if i1 > 0 else None
        after = keys_a[i2] if i2 < len(a) else None
        regions.append(
            Region(
                i1,
                i2,
                j1,
                j2,
                "".join(a[i1:i2]),
                "".join(b[j1:j2]),
                before,
                after,
                starts_a[i1],
                starts_b[j1],
            )
        )
    return regions


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
