"""Few-shot examples reordered or resampled between two versions of a system prompt."""

from __future__ import annotations

import re

EXAMPLE = re.compile(
    r"(?:example\b|q:|question:|input:|user:|a:|answer:|output:|<example>)", re.IGNORECASE
)
_PARAGRAPH = re.compile(r"\n\s*\n")
_HEADING = re.compile(r"^(?:#+ .*|[^\n]{0,60}:)$")


def paragraphs(text: str) -> list[str]:
    """Blank-line separated paragraphs; a heading line directly above an example is its own."""
    parts: list[str] = []
    for part in _PARAGRAPH.split(text):
        part = part.strip()
        if not part:
            continue
        first, _, rest = part.partition("\n")
        if rest.strip() and _HEADING.match(first.strip()) and EXAMPLE.match(rest.strip()):
            parts += [first.strip(), rest.strip()]
        else:
            parts.append(part)
    return parts


def fewshot_change(old: list[str], new: list[str]) -> tuple[int, str] | None:
    """(first differing paragraph, kind) when `new` reorders or resamples `old`'s examples."""
    first = next((i for i, (x, y) in enumerate(zip(old, new, strict=False)) if x != y), None)
    if first is None:
        return None
    if sorted(old) == sorted(new):
        moved = [p for x, p in zip(old, new, strict=True) if x != p]
        return (first, "reordered") if len(moved) >= 2 else None
    gone = [p for p in old if p not in new]
    came = [p for p in new if p not in old]
    examples = [p for p in old if EXAMPLE.match(p)]
    if not gone or not came or len(examples) < 2 or len(examples) == len(gone):
        return None
    if all(EXAMPLE.match(p) for p in gone + came):
        return first, "resampled"
    return None
