"""Text patterns of values that change between requests: clocks and random identifiers."""

from __future__ import annotations

import re

CLOCK = re.compile(
    r"\b\d{4}-\d{2}-\d{2}[T ]\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?"
    r"|\b\d{4}-\d{2}-\d{2}\b"
    r"|\b\d{1,2}:\d{2}:\d{2}\b"
    r"|\b\d{1,2}:\d{2}\s?(?:[AaPp][Mm])\b"
    r"|\b1[5-9]\d{8}(?:\d{3})?\b"
    r"|\b(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)[a-z]*,?\s+\d{1,2}\s+[A-Z][a-z]{2}"
    r"|\b(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*\.?\s+\d{1,2},?\s+\d{4}\b"
    r"|\b\d{1,2}\s+(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*\s+\d{4}\b"
)
"""Dates, times, datetimes and epoch seconds/milliseconds."""

RANDOM_ID = re.compile(
    r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"
    r"|\b[0-9A-HJKMNP-TV-Z]{26}\b"
    r"|\b(?:req|trace|session|sess|run|call|msg|chatcmpl|toolu|resp)[_-][A-Za-z0-9]{8,}\b"
    r"|\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{16,}\b"
)
"""UUIDs, ULIDs, prefixed ids (`req_…`, `call_…`, `toolu_…`) and long lowercase hex strings."""


def matches_at(pattern: re.Pattern[str], text: str, position: int, slack: int = 0) -> str | None:
    """The match of `pattern` covering `position` (within `slack` characters), if any."""
    start = max(0, position - 64)
    for match in pattern.finditer(text, start, min(len(text), position + 64)):
        if match.start() - slack <= position < match.end() + slack:
            return match.group(0)
    return None
