"""The fixed log: what the fix each reported divergence names changes in the requests' bodies.

Lint compares each request with the earlier requests that could have held its prefix (its
session's previous request, the holder of its longest cached prefix) and records, for every
defect it finds there, a `Fix`: what the rule's own advice ("Use instead") does to a request.
The fixes are applied to the bodies of the whole log afterwards (`pcache.rules.fixed_replay`),
so a fix also reaches the requests before the one where the defect was seen:

- a clock, an id or per-user data in a system prompt (`MoveLines`): the changed sentences leave
  the shared part; a clock goes to the request's newest turn, per-user data to the first user
  turn (their tokens stay, as new content), an id is dropped (it belongs in metadata);
- a clock or an id in a tool description (`ToolValue`) or name: the value is dropped;
- tools in another order: every request with that tool set sends it in the order the log sent
  it first; a tool removed or added: the full set, every time;
- one tool's definition written another way: the definition the log sent first;
- whitespace, number formats, few-shot order in a system prompt: the text the earlier request
  sent;
- the history of a conversation edited, windowed, compacted, its reasoning or ids dropped, or
  the system prompt changed mid-session (`Restore`): the request repeats what the earlier
  request of its conversation sent, then adds its own new messages (append-only).

A value fix moves only the lines that differed where a finding saw them (signatures for clocks
and ids, the equal lines around per-user data): a date that never changes is left alone.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import orjson

from pcache.divergence.regions import Region, changed_regions, lines_of, region_kind
from pcache.prompt.shapes.request import tool_name
from pcache.text.patterns import CHANGING_CLOCK, CHANGING_ID, masked, values_of

if TYPE_CHECKING:
    from pcache.rules.base import Diagnostic, Rule

FAMILIES = {"clock": CHANGING_CLOCK, "random_id": CHANGING_ID}
HISTORY_CAUSES = frozenset(
    {
        "history_edit",
        "history_truncated",
        "compaction",
        "reasoning_dropped",
        "tool_call_id",
        "arguments_reserialized",
        "tool_result_reserialized",
        "image",
        "system_message_moved",
        "whitespace",
        "number_format",
    }
)
"""Causes that, in a history message of the same conversation, the append-only restore fixes
(a clock or an id in a history message, or the template's own text, has no body to restore)."""


@dataclass(eq=False, slots=True)
class Fix:
    """One defect, as found, and the finding it is charged to."""

    rule: Rule
    cause: str
    summary: str
    detail: str
    hint: str
    origin: int
    """The request (its number) where the defect was seen."""
    partner: str
    """The label of the earlier request it was seen against."""
    path: str
    """The normalized path of the changed unit in the origin request."""
    value: str = ""
    """What changed, shortly (the moved lines, the tool names)."""
    diagnostic: Diagnostic | None = None


@dataclass(eq=False, slots=True)
class MoveLines:
    """Lines of system message `slot` that hold a changing value, moved out of the prefix."""

    fix: Fix
    slot: int
    cause: str
    signatures: set[str] = field(default_factory=set)
    """Clock and id lines with their values masked (`patterns.masked`)."""
    anchors: set[tuple[str | None, str | None]] = field(default_factory=set)
    """Per-user data: the equal lines around it (None: the text's start or end)."""

    def take(self, text: str) -> tuple[str, str]:
        """(text without the lines, the lines taken)."""
        lines = lines_of(text)
        if self.cause in FAMILIES:
            return self._take_values(text, lines)
        keys = [line.rstrip() for line in lines]
        for before, after in self.anchors:
            start = 0 if before is None else _index(keys, before, 0)
            if start is None:
                continue
            start += 0 if before is None else 1
            end = len(lines) if after is None else _index(keys, after, start)
            if end is None or end <= start:
                continue
            head, tail = "".join(lines[:start]), "".join(lines[end:])
            if not tail:  # the data ended the text: so does what stood before it
                head = head.rstrip()
            if not head:
                tail = tail.lstrip()
            return head + tail, "".join(lines[start:end])
        return text, ""

    def _take_values(self, text: str, lines: list[str]) -> tuple[str, str]:
        """The units whose values of the family, masked, give a recorded signature (a unit is
        masked only when it holds a signature's longest literal part)."""
        needles = {max(signature.split("\0"), key=len) for signature in self.signatures}
        keep, taken = [], []
        for line in lines:
            moved = False
            if "" in needles or any(needle in line for needle in needles):
                mask = masked_unit(self.cause, line)
                moved = "\0" in mask and mask.strip() in self.signatures
            (taken if moved else keep).append(line)
        if not taken:
            return text, ""
        return "".join(keep), "".join(taken)


@lru_cache(maxsize=1 << 16)
def masked_unit(cause: str, unit: str) -> str:
    """`patterns.masked` of one unit of a system prompt (units repeat from request to request:
    only the changed ones are masked again)."""
    return masked(FAMILIES[cause], unit)


def _index(lines: list[str], line: str, start: int) -> int | None:
    try:
        return lines.index(line, start)
    except ValueError:
        return None


@dataclass(eq=False, slots=True)
class ToolValue:
    fix: Fix
    name: str
    cause: str

    def clean(self, description: str) -> str:
        family = FAMILIES[self.cause]
        for value in values_of(family, description):
            description = description.replace(value, "")
        return description.replace("  ", " ").strip()


@dataclass(eq=False, slots=True)
class Restore:
    """Request `number` repeats what request `partner` sent (fixed) in `unit`."""

    fix: Fix
    partner: int
    unit: str
    """`history` (the messages after the system prompt) or `prefix` (the system prompt)."""


def exact(value: Any) -> bytes:
    """A JSON value as sent, key order included (dicts compare equal in any order; a prompt
    does not)."""
    return orjson.dumps(value)


def text_key(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


@dataclass(slots=True)
class FixPlan:
    """Every fix found in a pass over the log, and what the log says is its stable form."""

    fixes: list[Fix] = field(default_factory=list)
    moves: list[MoveLines] = field(default_factory=list)
    tool_values: dict[str, ToolValue] = field(default_factory=dict)
    tool_name_ids: dict[str, Fix] = field(default_factory=dict)
    """Tool names (their ids masked) that carry a random alias."""
    tool_orders: dict[frozenset[str], Fix] = field(default_factory=dict)
    """Tool sets sent in more than one order."""
    tool_sets: list[tuple[set[frozenset[str]], list[str], Fix]] = field(default_factory=list)
    """(the tool sets seen, the full set's names in order, the fix)."""
    tool_variants: dict[str, dict[bytes, Fix]] = field(default_factory=dict)
    """Tool name -> the definitions of it that a finding saw differ."""
    slot_variants: dict[tuple[str, bytes], tuple[str, Fix]] = field(default_factory=dict)
    """(normalizer, normalized text) -> the text the earlier request sent."""
    restores: dict[int, list[Restore]] = field(default_factory=dict)
    first_orders: dict[frozenset[str], tuple[str, ...]] = field(default_factory=dict)
    """The order each tool set was first sent in (the stable order a fix sends it in)."""
    first_definitions: dict[str, bytes] = field(default_factory=dict)
    """The definition each tool was first sent with."""
    samples: dict[tuple[str, bytes], Any] = field(default_factory=dict)
    """One tool object of each definition a fix may need."""
    _last_tools: bytes = b""

    def __bool__(self) -> bool:
        return bool(self.fixes)

    @property
    def slot_kinds(self) -> list[str]:
        """The normalizers some drift was seen under (`pcache.rules.defects.NORMALIZERS`)."""
        return sorted({kind for kind, _ in self.slot_variants})

    def count(self, tools: list[Any]) -> None:
        """Remember the first order of a tool set and the first definition of each tool: the
        stable forms a fix sends (what the log sent first stays as it was)."""
        if not tools:
            return
        whole = orjson.dumps(tools)
        if whole == self._last_tools:  # consecutive requests mostly send the same tools
            return
        self._last_tools = whole
        names = tuple(tool_name(tool) for tool in tools)
        self.first_orders.setdefault(frozenset(names), names)
        for name, tool in zip(names, tools, strict=True):
            if name not in self.first_definitions:
                key = exact(tool)
                self.first_definitions[name] = key
                self.samples[(name, key)] = tool

    # -- what a comparison found ------------------------------------------------------------

    def add(self, fix: Fix) -> Fix:
        self.fixes.append(fix)
        return fix

    def move_lines(self, fix: Fix, slot: int, region: Region) -> bool:
        """Record the lines of `region` (of system message `slot`) as values to move."""
        move = next(
            (m for m in self.moves if m.slot == slot and m.cause == fix.cause), None
        ) or MoveLines(fix, slot, fix.cause)
        if fix.cause in FAMILIES:
            family = FAMILIES[fix.cause]
            for text in (region.a_text, region.b_text):
                for line in lines_of(text):
                    if values_of(family, line):
                        move.signatures.add(masked(family, line).strip())
            if not move.signatures:
                return False
        else:
            move.anchors.add((region.before, region.after))
        if move not in self.moves:
            self.moves.append(move)
            self.add(fix)
            return True
        return False

    def stable_order(self, names: frozenset[str]) -> tuple[str, ...] | None:
        """The order these tools were first sent in."""
        return self.first_orders.get(names)

    def stable_definition(self, name: str) -> bytes | None:
        """The definition of a tool whose definition drifted that the log sent first."""
        if name not in self.tool_variants:
            return None
        return self.first_definitions.get(name)


def compare_slots(old: str, new: str) -> list[tuple[Region, str | None]]:
    """The changed regions of a system message and the kind of value each holds."""
    return [(region, region_kind(region)) for region in changed_regions(old, new)]
