"""Whether a file's first bytes are text pcache reads: UTF-8, not UTF-16 or UTF-32 (named as
such, with the command that converts them) and not binary. JSON, JSONL and CSV inputs alike."""

from __future__ import annotations

from pcache.errors import InputError

SNIFF_BYTES = 8192
"""How much of a file's start is looked at."""
_WIDE_BOMS = (
    (b"\xff\xfe\x00\x00", "UTF-32"),
    (b"\x00\x00\xfe\xff", "UTF-32"),
    (b"\xff\xfe", "UTF-16"),
    (b"\xfe\xff", "UTF-16"),
)


def check_text(head: bytes, source: str) -> None:
    """UTF-16 and UTF-32 text are named as such; other NUL bytes mean a binary file."""
    for mark, encoding in _WIDE_BOMS:
        if head.startswith(mark):
            raise InputError(source, _wide_text(encoding))
    if b"\x00" in head:
        half = len(head) // 2
        if half and max(head[0::2].count(0), head[1::2].count(0)) >= 0.9 * half:
            raise InputError(source, _wide_text("UTF-16"))
        raise InputError(source, "binary file, expected JSON text")


def _wide_text(encoding: str) -> str:
    return f"is {encoding} text; pcache reads UTF-8 (convert it: iconv -f {encoding} -t UTF-8)"
