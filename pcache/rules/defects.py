"""What differs between a request and an earlier one that a rule's fix undoes.

`find_defects` compares a request R with one earlier request C it could have reused (its
session's previous request, the holder of its longest cached prefix) and records each defect
in the `FixPlan`, whichever of the two carries it:

- the shared part (system and developer messages ahead of the first turn, tools), between any
  two requests of one app: each run of changed lines is classified by what it holds (a clock,
  an id, per-user data), whitespace and number formats by what they normalize to; tools by
  order, set and definition. Two different system prompts (most of the text differs) are two
  apps: nothing to undo;
- the history, when R continues C's conversation and does not append to it: the divergence's
  cause (`pcache.divergence.classify.explain`) is fixed by the append-only restore.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable
from typing import TYPE_CHECKING

from pcache.divergence.causes import CAUSES
from pcache.divergence.classify import (
    RENDERED_PARAMETERS,
    definition_kind,
    explain,
    small_change,
)
from pcache.divergence.fewshot import fewshot_change, paragraphs
from pcache.divergence.history import normalize_numbers, prefix_count, squash, tool_function
from pcache.prompt.shapes.request import tool_name
from pcache.rules.fix_plan import (
    FAMILIES,
    HISTORY_CAUSES,
    Fix,
    FixPlan,
    Restore,
    ToolValue,
    compare_slots,
    exact,
    text_key,
)
from pcache.rules.patterns import short
from pcache.text.patterns import masked, values_of
from pcache.text.redaction import quote, shown

if TYPE_CHECKING:
    from pcache.rules.base import Rule
    from pcache.rules.context import RequestContext

Reports = Callable[["Rule"], bool]


NORMALIZERS = {"whitespace": squash, "number_format": normalize_numbers, "exact": str}
"""What a system prompt's drift keeps: a text that normalizes to a key seen drift is sent as
the earlier request sent it (`exact`: few-shot examples reordered or resampled, pinned)."""


class Finder:
    """Records the defects between requests in one plan (the rules as selected)."""

    def __init__(self, plan: FixPlan, rule_for_cause: dict[str, Rule], reports: Reports):
        self.plan = plan
        self.rule_for_cause = rule_for_cause
        self.reports = reports
        self.earlier_number = -1
        self.followed = False
        """Whether the shared part goes on after the system prompt (tools both send)."""

    def _fix(self, cause: str, origin: int, partner: str, path: str, detail: str, value: str):
        rule = self.rule_for_cause.get(cause)
        if rule is None or not self.reports(rule):
            return None
        about = CAUSES[cause]
        return Fix(rule, cause, about.summary, detail, about.hint, origin, partner, path, value)

    def find(
        self,
        current: RequestContext,
        number: int,
        earlier: RequestContext,
        earlier_number: int,
        conversation: bool,
    ) -> None:
        """Record what differs between `current` (request `number`) and `earlier`;
        `conversation`: `current` continues `earlier`'s conversation."""
        request, other = current.request, earlier.request
        if not request.messages or not other.messages:
            return  # a text prompt or token ids: no parts to compare
        if request.cache_salt != other.cache_salt:
            return
        label = other.label
        if earlier.prefix_part != current.prefix_part:
            self.earlier_number = earlier_number
            self.followed = bool(request.tools and other.tools)
            same_app = self._prefix(request, other, number, label, conversation)
            if same_app or conversation:
                self._tools(request, other, number, label)
                self._parameters(request, other, number, earlier_number, label, conversation)
        if conversation:
            self._history(current, earlier, number, earlier_number)

    # -- system and developer messages --------------------------------------------------------

    def _prefix(self, request, other, number: int, label: str, conversation: bool) -> bool:
        """Compare the system prompts; False when they are two apps' (nothing shared)."""
        mine, theirs = request.messages, other.messages
        head = min(prefix_count(mine), prefix_count(theirs))
        same_app = True
        for slot in range(head):
            old, new = theirs[slot].get("content"), mine[slot].get("content")
            if theirs[slot].get("role") != mine[slot].get("role") or old == new:
                continue
            if not isinstance(old, str) or not isinstance(new, str):
                continue
            path = f"messages[{slot}].content"
            regions = compare_slots(old, new)
            cause = _drift(old, new, regions)
            if cause is not None:
                fix = self._fix(cause, number, label, path, f"in messages[{slot}]", "")
                key = "exact" if cause == "fewshot_order" else cause
                variant = (key, text_key(NORMALIZERS[key](new)))
                if fix is not None and variant not in self.plan.slot_variants:
                    self.plan.slot_variants[variant] = (old, self.plan.add(fix))
            else:
                same_app &= self._regions(regions, old, new, slot, number, label, conversation)
        return same_app

    def _regions(self, regions, old: str, new: str, slot: int, number: int, label, conversation):
        changed = max(
            sum(len(r.a_text) for r, _ in regions), sum(len(r.b_text) for r, _ in regions)
        )
        shared = len(old) - sum(len(r.a_text) for r, _ in regions)
        if changed > shared and not conversation:
            return False  # another system prompt: another app
        path = f"messages[{slot}].content"
        for region, kind in regions:
            if kind is None and not conversation and small_change(old, new):
                kind = "per_user"  # two users' versions of one prompt
            if kind == "per_user" and region.after is None and not self.followed:
                continue  # nothing shared follows it: moving it saves nothing
            if kind is None and conversation:
                kind = "system_prompt"
            if kind is None:
                continue
            value = short(region.b_text.strip() or region.a_text.strip())
            fix = self._fix(kind, number, label, path, f"in messages[{slot}]", value)
            if fix is None:
                continue
            if kind == "system_prompt":
                self.plan.restores.setdefault(number, []).append(
                    Restore(self.plan.add(fix), self.earlier_number, "prefix")
                )
            else:
                self.plan.move_lines(fix, slot, region)
        return True

    # -- tools --------------------------------------------------------------------------------

    def _tools(self, request, other, number: int, label: str) -> None:
        names, their_names = (
            [tool_name(t) for t in request.tools],
            [tool_name(t) for t in other.tools],
        )
        if names == their_names and request.tools == other.tools:
            self._definitions(request, other, number, label)
            return
        mine, theirs = frozenset(names), frozenset(their_names)
        if mine != theirs and self._renamed(names, their_names, number, label):
            return
        if mine == theirs and names != their_names:
            if mine not in self.plan.tool_orders:
                detail = f"A: {_names(their_names)}; B: {_names(names)}"
                fix = self._fix("tool_order", number, label, "tools", detail, "")
                if fix is not None:
                    self.plan.tool_orders[mine] = self.plan.add(fix)
        elif mine != theirs and mine & theirs:
            self._tool_set(names, their_names, number, label)
        self._definitions(request, other, number, label)

    def _renamed(self, names: list[str], their_names: list[str], number: int, label) -> bool:
        """Tools whose names differ only in an id (a random alias per request)."""
        if len(names) != len(their_names):
            return False
        pairs = [(a, b) for a, b in zip(their_names, names, strict=True) if a != b]
        family = FAMILIES["random_id"]
        if not pairs or any(
            not values_of(family, b) or masked(family, a) != masked(family, b) for a, b in pairs
        ):
            return False
        fix = self._fix("random_id", number, label, "tools", "in a tool name", short(pairs[0][1]))
        if fix is not None:
            for _, name in pairs:
                self.plan.tool_name_ids.setdefault(masked(family, name), fix)
            self.plan.add(fix)
        return True

    def _tool_set(self, names: list[str], their_names: list[str], number: int, label) -> None:
        mine, theirs = frozenset(names), frozenset(their_names)
        for sides, full, _ in self.plan.tool_sets:
            if mine in sides or theirs in sides:
                sides.update((mine, theirs))
                full.extend(name for name in [*their_names, *names] if name not in full)
                return
        added, removed = sorted(mine - theirs), sorted(theirs - mine)
        detail = "; ".join(
            ([f"added {_names(added)}"] if added else [])
            + ([f"removed {_names(removed)}"] if removed else [])
        )
        fix = self._fix("tool_set", number, label, "tools", detail, "")
        if fix is None:
            return
        full = list(their_names) + [name for name in names if name not in theirs]
        self.plan.tool_sets.append(({mine, theirs}, full, self.plan.add(fix)))

    def _definitions(self, request, other, number: int, label: str) -> None:
        theirs = {tool_name(tool): tool for tool in other.tools}
        for index, tool in enumerate(request.tools):
            name = tool_name(tool)
            old = theirs.get(name)
            if old is None or old is tool:
                continue
            left, right = exact(old), exact(tool)
            if left == right:
                continue
            path = f"tools[{index}]"
            if old == tool:
                cause, detail = "key_order", f"tool {quote(name)}: same schema, different key order"
            else:
                cause, detail = "tool_definition", f"tool {quote(name)} changed"
                if _without_description(old) == _without_description(tool):
                    kind = definition_kind(old, tool)
                    if kind is not None:
                        fix = self._fix(kind, number, label, path, f"in tool {quote(name)}", "")
                        if fix is not None and name not in self.plan.tool_values:
                            self.plan.tool_values[name] = ToolValue(self.plan.add(fix), name, kind)
                        continue
            fix = self._fix(cause, number, label, path, detail, "")
            if fix is None:
                continue
            variants = self.plan.tool_variants.setdefault(name, {})
            if left in variants and right in variants:
                continue
            self.plan.add(fix)
            for key in (left, right):
                variants.setdefault(key, fix)

    # -- parameters and history --------------------------------------------------------------

    def _parameters(self, request, other, number, earlier_number, label, conversation) -> None:
        if not conversation:
            return
        changed = [key for key in RENDERED_PARAMETERS if request.raw.get(key) != other.raw.get(key)]
        if not changed:
            return
        detail = ", ".join(f"{key} changed" for key in changed)
        fix = self._fix("parameter", number, label, changed[0], detail, "")
        if fix is not None:
            self.plan.restores.setdefault(number, []).append(
                Restore(self.plan.add(fix), earlier_number, "parameters")
            )

    def _history(self, current, earlier, number: int, earlier_number: int) -> None:
        mine, theirs = current.request.messages, earlier.request.messages
        head, their_head = prefix_count(mine), prefix_count(theirs)
        rest, their_rest = mine[head:], theirs[their_head:]
        if not their_rest or exact(rest[: len(their_rest)]) == exact(their_rest):
            return  # R appends to C's conversation: nothing to restore
        a, b = earlier.rendered, current.rendered
        start_a = _history_token(a, their_head)
        start_b = _history_token(b, head)
        if start_a is None or start_b is None:
            return
        divergence = explain(a, b, start_a, start_b, True, continued=True)
        if divergence.b_char is not None and divergence.b_char < b.token_char(start_b):
            return  # the two differ before the history: the shared part's own cause
        cause = divergence.cause.kind
        if cause not in HISTORY_CAUSES:
            return  # a value in a history message, or the template: no body to restore
        path = divergence.b_unit or f"messages[{head}]"
        detail = divergence.cause.detail
        value = f"{short(divergence.a_value)} -> {short(divergence.b_value)}"
        fix = self._fix(cause, number, earlier.request.label, path, detail, value)
        if fix is not None:
            self.plan.restores.setdefault(number, []).append(
                Restore(self.plan.add(fix), earlier_number, "history")
            )


def _names(names: list[str]) -> str:
    return ", ".join(shown(name) for name in names)


def _drift(old: str, new: str, regions) -> str | None:
    """How one system prompt drifted from another without changing what it says (read from
    the changed sentences; the example order from the whole texts)."""
    before = "".join(region.a_text for region, _ in regions)
    after = "".join(region.b_text for region, _ in regions)
    if squash(before) == squash(after) and squash(old) == squash(new):
        return "whitespace"
    digits = any(character.isdigit() for character in before + after)
    numbers = digits and normalize_numbers(before) == normalize_numbers(after)
    if numbers and normalize_numbers(old) == normalize_numbers(new):
        return "number_format"
    if "\n\n" in old and fewshot_change(paragraphs(old), paragraphs(new)) is not None:
        return "fewshot_order"
    return None


def _history_token(rendered, index: int) -> int | None:
    """The first token of message `index` (where the history starts) in the render."""
    prefix = f"messages[{index}]"
    for span in rendered.spans:
        if span.normalized == prefix or span.normalized.startswith((prefix + ".", prefix + "[")):
            return max(bisect_right(rendered.token_starts, span.start) - 1, 0)
    return None


def _without_description(tool):
    function = dict(tool_function(tool))
    function.pop("description", None)
    return function
