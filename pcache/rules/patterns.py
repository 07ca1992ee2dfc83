"""String helpers the rules share: where two texts part, and a value quoted for a message."""

from __future__ import annotations

from pcache.text.prefix import common_prefix_length
from pcache.text.redaction import active


def first_difference(a: str, b: str) -> int | None:
    """Index of the first differing character, or None when equal."""
    return None if a == b else common_prefix_length(a, b)


def short(text: str, limit: int = 40) -> str:
    """A value quoted for a message, shortened in the middle (its shape under `--redact`)."""
    redactor = active()
    if redactor is not None:
        return redactor.shape(text)
    text = text.replace("\n", "\\n")
    if len(text) > limit:
        text = text[: limit // 2 - 1] + "…" + text[-(limit // 2 - 1) :]
    return repr(text)
