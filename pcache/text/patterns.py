"""Values that change between requests: clocks, dates, random identifiers. One module for all.

`pcache diff`'s cause classifier and every lint rule read these definitions; nothing else in
the project writes a clock or id pattern. Each pattern names one family of values as real code
prints them:

- `CLOCK`: a time of day: ISO 8601 date-times (with or without seconds, `T` or a space, a
  fraction, a zone), `%Y-%m-%d %H:%M`, US and European `10/29/2026 9:14`, bare `09:14:03`,
  12-hour times (`9:14 PM`), RFC 2822 and HTTP dates (`Sun, 29 Nov 2026 09:14:03 GMT`), "now
  is …" phrases next to a number, and relative times ("3 minutes ago", "in 2 hours");
- `DATE`: day precision (ISO dates, "Monday, 30 November 2026", "November 30, 2026", `30.11.2026`);
- `EPOCH`: Unix epoch seconds or milliseconds (2017 to 2033);
- `RANDOM_ID`: UUIDs, ULIDs, W3C trace parents and trace/span ids, long hex or base64url
  nonces, prefixed request/trace/session ids;
- `TOOL_CALL_ID`: provider-generated call and response ids (`call_…`, `toolu_…`).
"""

from __future__ import annotations

import re
from functools import lru_cache

_MONTH = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)[a-z]*\.?"
_WEEKDAY = r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)[a-z]*\.?"
_ZONES = r"(?:Z|UTC|GMT|CET|CEST|EET|EST|EDT|CST|CDT|MST|MDT|PST|PDT|BST|IST|JST|AEST|AEDT)"
_ZONE = r"(?:\s?(?:" + _ZONES + r"|[+-]\d{2}:?\d{2}))?"
_UNIT = r"(?:sec(?:ond)?s?|min(?:ute)?s?|hours?|hrs?|days?|weeks?|months?|years?)"

CLOCK = re.compile(
    r"\b\d{4}-\d{2}-\d{2}[T ]\d{1,2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?"
    + _ZONE
    + r"|\b\d{4}\d{2}\d{2}T\d{6}Z?\b"
    + r"|\b\d{1,2}[/.]\d{1,2}[/.]\d{2,4},? \d{1,2}:\d{2}(?::\d{2})?"
    + r"|\b"
    + _WEEKDAY
    + r",? \d{1,2} "
    + _MONTH
    + r" \d{4} \d{1,2}:\d{2}(?::\d{2})?"
    + _ZONE
    + r"|\b"
    + _MONTH
    + r" \d{1,2},? \d{4},? (?:at )?\d{1,2}:\d{2}(?::\d{2})?"
    + r"|\b\d{1,2}:\d{2}(?::\d{2})?\s?(?:[AaPp]\.?[Mm]\.?)(?![A-Za-z])"
    + r"|(?<![\d:.])\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?(?![\d:])"
    + r"|\b(?:at|@|time:?|clock:?)\s(?:[01]?\d|2[0-3]):[0-5]\d(?![\d:])"
    + r"|(?<![\d:.])(?:[01]?\d|2[0-3]):[0-5]\d\s?"
    + _ZONES
    + r"\b"
    + r"|\b(?:current time|the time is|now is|time now|timestamp)\b[^\n]{0,40}\d"
    + r"|\b\d+\s"
    + _UNIT
    + r"\sago\b|\bin \d+\s"
    + _UNIT
    + r"\b"
    + r"|\b(?:just now|moments? ago|a (?:minute|moment) ago|an hour ago)\b",
    re.IGNORECASE,
)
"""Time-of-day precision (or a relative time): changes within a day."""

DATE = re.compile(
    r"\b\d{4}-\d{2}-\d{2}\b"
    r"|\b\d{1,2}[/.]\d{1,2}[/.]\d{4}\b"
    r"|\b" + _WEEKDAY + r",? \d{1,2} [A-Z][a-z]+\.? \d{4}\b"
    r"|\b\d{1,2} " + _MONTH + r" \d{4}\b"
    r"|\b(?:" + _WEEKDAY + r",? )?(?:January|February|March|April|May|June|July|August"
    r"|September|October|November|December) \d{1,2}(?:st|nd|rd|th)?,? \d{4}\b"
    r"|\b(?:yesterday|today|tomorrow)\b(?=[^\n]{0,20}\d)"
    r"|\b(?:today is|current date)\b[^\n]{0,40}\d"
)
"""Day precision dates (evidence when they change; a hint when alone)."""

EPOCH = re.compile(r"(?<![\d.])1[5-9]\d{8}(?:\d{3})?(?:\.\d+)?(?![\d])")
"""Unix epoch seconds or milliseconds (2017 to 2033): a clock once it changes."""

RANDOM_ID = re.compile(
    r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"
    r"|\b[0-9a-fA-F]{32}\b"
    r"|\b0[0-7]-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}\b"
    r"|\b[0-7][0-9A-HJKMNP-TV-Z]{25}\b"
    r"|(?<![0-9A-Za-z])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{16,}(?![0-9A-Za-z])"
    r"|\b(?:req|request|trace|span|session|sess|run|msg|conv|nonce|idem|evt|txn)[_-]"
    r"(?=[A-Za-z0-9]*\d)[A-Za-z0-9]{8,}\b"
    r"|\b(?:nonce|request[_ ]id|trace[_ ]id|span[_ ]id|idempotency[_ ]key)\b[\"']?\s*[:=]\s*"
    r"[\"']?(?=[A-Za-z0-9_\-+/]*\d)[A-Za-z0-9_\-+/]{8,}={0,2}",
    re.IGNORECASE,
)
"""UUIDs, ULIDs, trace parents, hex and labelled nonces, prefixed request/trace ids."""

TOOL_CALL_ID = re.compile(r"\b(?:call|toolu|chatcmpl|resp|fc)[_-][A-Za-z0-9]{8,}\b")
"""Provider-generated call and response ids (`call_…`, `toolu_…`, `chatcmpl-…`)."""

PERSONAL = re.compile(
    r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b"
    r"|(?<![\w])\+?\d[\d ()-]{7,}\d(?![\w])"
    r"|\b(?:name|customer|user|client|account|member|plan|tier|email|phone|address|profile"
    r"|preferences?|memor(?:y|ies))\b\s*[:=]",
    re.IGNORECASE,
)
"""What marks text as one person's: an email address, a phone number, a labelled name, plan,
account, profile or memory."""

CHANGING_CLOCK = (CLOCK, DATE, EPOCH)
"""What counts as a clock once the value changes between two requests."""
CHANGING_ID = (RANDOM_ID, TOOL_CALL_ID)


def values_of(patterns, text: str) -> list[str]:
    """Every value of `patterns` in `text`, in order (overlaps between patterns kept)."""
    return [match.group(0) for pattern in patterns for match in pattern.finditer(text)]


def masked(patterns, text: str) -> str:
    """`text` with every value of `patterns` replaced by one placeholder: two lines that differ
    only in their clock (or id) values mask to the same string."""
    for pattern in patterns:
        text = pattern.sub("\0", text)
    return text


def matches_at(pattern: re.Pattern[str], text: str, position: int, slack: int = 0) -> str | None:
    """The match of `pattern` covering `position` (within `slack` characters), if any."""
    start = max(0, position - 80)
    for match in pattern.finditer(text, start, min(len(text), position + 80)):
        if match.start() - slack <= position < match.end() + slack:
            return match.group(0)
    return None


def value_at(patterns, a_text: str, a_char: int, b_text: str, b_char: int) -> bool:
    """Both texts hold a value of one of `patterns` around their first differing character."""
    return any(
        matches_at(pattern, a_text, a_char, 1) and matches_at(pattern, b_text, b_char, 1)
        for pattern in patterns
    )


@lru_cache(maxsize=4096)
def search_clock(text: str) -> tuple[int, str] | None:
    """First time-of-day value in `text` (cached: system prompts repeat across sessions)."""
    match = CLOCK.search(text)
    return (match.start(), match.group(0)) if match else None


@lru_cache(maxsize=4096)
def search_random_id(text: str) -> tuple[int, str] | None:
    match = RANDOM_ID.search(text)
    return (match.start(), match.group(0)) if match else None
