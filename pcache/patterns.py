"""Text patterns of values that change between requests: clocks, dates, random identifiers.

One set for the whole project: `pcache lint`'s content rules and `pcache diff`'s cause
classification read the same definitions.
"""

from __future__ import annotations

import re

CLOCK = re.compile(
    r"\b\d{4}-\d{2}-\d{2}[T ]\d{1,2}:\d{2}(?::\d{2})?"
    r"|(?<!\d)\d{1,2}:\d{2}:\d{2}(?!\d)"
    r"|\b\d{1,2}:\d{2}\s?(?:[AaPp]\.?[Mm]\.?)(?![A-Za-z])"
    r"|\b(?:today is|current (?:date|time)|the time is|now is)\b[^\n]{0,40}\d",
    re.IGNORECASE,
)
"""Time-of-day precision, or a phrase announcing today's date next to a number."""

DATE = re.compile(
    r"\b\d{4}-\d{2}-\d{2}\b"
    r"|\b(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)[a-z]*,? \d{1,2} [A-Z][a-z]+ \d{4}\b"
    r"|\b\d{1,2} (?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]* \d{4}\b"
    r"|\b(?:January|February|March|April|May|June|July|August|September|October|November"
    r"|December) \d{1,2},? \d{4}\b"
)
"""Day precision dates (only evidence when they change between requests)."""

RANDOM_ID = re.compile(
    r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"
    r"|\b[0-9A-HJKMNP-TV-Z]{26}\b"
    r"|(?<![0-9A-Za-z])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{16,}(?![0-9A-Za-z])"
    r"|\b(?:req|request|trace|span|session|run|msg|conv)[_-](?=[A-Za-z0-9]*\d)[A-Za-z0-9]{8,}\b"
)
"""UUIDs, ULIDs, long hex strings and prefixed request/trace/session ids."""

EPOCH = re.compile(r"(?<!\d)1[5-9]\d{8}(?:\d{3})?(?!\d)")
"""Unix epoch seconds or milliseconds (2017 to 2033): a clock once it changes between requests."""

TOOL_CALL_ID = re.compile(r"\b(?:call|toolu|chatcmpl|resp)[_-][A-Za-z0-9]{8,}\b")
"""Provider-generated call and response ids (`call_…`, `toolu_…`, `chatcmpl-…`)."""


def matches_at(pattern: re.Pattern[str], text: str, position: int, slack: int = 0) -> str | None:
    """The match of `pattern` covering `position` (within `slack` characters), if any."""
    start = max(0, position - 64)
    for match in pattern.finditer(text, start, min(len(text), position + 64)):
        if match.start() - slack <= position < match.end() + slack:
            return match.group(0)
    return None
