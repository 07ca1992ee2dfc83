"""Text patterns and string comparisons shared by the content rules."""

from __future__ import annotations

from pcache.divergence.history import normalize_whitespace
from pcache.prefix import common_prefix_length


def first_difference(a: str, b: str) -> int | None:
    """Index of the first differing character, or None when equal."""
    return None if a == b else common_prefix_length(a, b)


def changed_windows(a: str, b: str) -> tuple[int, str, str]:
    """Where two strings first differ, and the differing middles of each (common ends removed)."""
    start = first_difference(a, b)
    assert start is not None
    end_a, end_b = len(a), len(b)
    while end_a > start and end_b > start and a[end_a - 1] == b[end_b - 1]:
        end_a -= 1
        end_b -= 1
    return start, a[start:end_a], b[start:end_b]


def widen(text: str, start: int, end: int, margin: int = 24) -> str:
    """The window [start, end) widened by `margin` characters on each side."""
    return text[max(0, start - margin) : min(len(text), end + margin)]


def short(text: str, limit: int = 40) -> str:
    """A value quoted for a message, shortened in the middle."""
    text = text.replace("\n", "\\n")
    if len(text) > limit:
        text = text[: limit // 2 - 1] + "…" + text[-(limit // 2 - 1) :]
    return repr(text)


def changed_context(a: str, b: str, margin: int = 20) -> tuple[int, str, str]:
    """Where two strings first differ, and each differing middle widened by `margin` characters."""
    start, old, new = changed_windows(a, b)
    return (
        start,
        widen(a, start, start + len(old), margin),
        widen(b, start, start + len(new), margin),
    )


__all__ = ["normalize_whitespace"]
