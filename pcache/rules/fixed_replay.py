"""The log with every reported defect fixed, replayed through the same cache as the log as is.

A second pass over the requests, in the same order, once the first pass has found the fixes
(`pcache.rules.fix_plan`): each request's body is fixed (`fixed_request`), rendered with the same
renderer, and looked up in an unlimited prefix cache of the fixed log, exactly as the log as
is was in the first pass. What a request re-prefills less in the fixed log is its saving; it
goes to the fixes that changed the request (shared equally), or, for a request no fix changed
that now finds a longer prefix, to the fixes that changed the request holding it. Summed, the
savings are what `pcache replay --simulate` of the fixed log (`--write-fixed`) gains over the
log as is: each token is counted once.

A conversation keeps what its earlier requests were fixed to: a request that appends to its
session's previous request repeats that request's fixed messages, then its own new ones (a
clock moved into a user turn stays there once the turn is history).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from pcache.divergence.classify import RENDERED_PARAMETERS
from pcache.divergence.history import prefix_count
from pcache.prompt.shapes.request import KIND_OPENAI, Request, tool_name
from pcache.rules.defects import NORMALIZERS
from pcache.rules.fix_plan import (
    FAMILIES,
    Fix,
    FixPlan,
    exact,
    text_key,
)
from pcache.text.patterns import masked, values_of

STANDALONE_SHAPES = ("chat", "gemini", "bedrock")
"""Shapes whose body reads back alone (a span or a Responses chain needs its log)."""


@dataclass(slots=True)
class Fixed:
    """A request of the fixed log: its body and what changed it."""

    original: Request
    """The request as sent."""
    request: Request
    """The request as the fixed log sends it (the original when nothing changed it)."""
    direct: list[Fix] = field(default_factory=list)
    """Fixes that changed this request's own body."""
    carried: list[Fix] = field(default_factory=list)
    """Fixes of earlier requests of its conversation that its history repeats."""
    moved: dict[Fix, str] = field(default_factory=dict)
    """What each value fix took out of this request's shared part."""
    body: dict[str, Any] | None = None
    """The Chat Completions body of the fixed request (None: nothing changed it)."""

    @property
    def changed(self) -> bool:
        return bool(self.direct or self.carried)


@dataclass(slots=True)
class Kept:
    """What a later request of the conversation needs of a fixed request."""

    rest: list[dict[str, Any]]
    """Its messages after the system prompt, as sent."""
    fixed_rest: list[dict[str, Any]]
    """Them in the fixed log (`rest` itself when no fix changed them)."""
    fixed_prefix: list[dict[str, Any]]
    raw: dict[str, Any]
    fixes: list[Fix]
    """The fixes its fixed messages carry."""


def fixed_request(
    plan: FixPlan, number: int, request: Request, previous: Kept | None, partners: dict[int, Kept]
) -> tuple[Fixed, Kept]:
    """The request as the fixed log sends it (`previous`: its session's previous request,
    fixed; `partners`: the fixed requests its restores repeat)."""
    messages = request.messages
    head = prefix_count(messages)
    prefix = [dict(message) for message in messages[:head]]
    rest = list(messages[head:])
    tools = list(request.tools)
    raw_changes: dict[str, Any] = {}
    fixed = Fixed(request, request)
    own = 0
    restores = plan.restores.get(number, ())
    history = next((r for r in restores if r.unit == "history"), None)
    if history is not None and history.partner in partners:
        partner = partners[history.partner]
        joined = _append_only(partner, rest)
        if joined is not None:
            rest, own = joined
            fixed.direct.append(history.fix)
            fixed.carried.extend(partner.fixes)
    elif (
        previous is not None
        and previous.fixed_rest is not previous.rest
        and exact(rest[: len(previous.rest)]) == exact(previous.rest)
    ):
        own = len(previous.fixed_rest)
        rest = [*previous.fixed_rest, *rest[len(previous.rest) :]]
        fixed.carried.extend(previous.fixes)
    rest_fixes = list(dict.fromkeys([*fixed.direct, *fixed.carried]))
    first_user_is_own = any(message.get("role") == "user" for message in rest[own:]) and not any(
        message.get("role") == "user" for message in rest[:own]
    )
    for restore in restores:
        if restore.unit == "prefix" and restore.partner in partners:
            partner = partners[restore.partner]
            if len(partner.fixed_prefix) == len(prefix):
                prefix = [dict(message) for message in partner.fixed_prefix]
                fixed.direct.append(restore.fix)
        elif restore.unit == "parameters" and restore.partner in partners:
            for key in RENDERED_PARAMETERS:
                if partners[restore.partner].raw.get(key) != request.raw.get(key):
                    raw_changes[key] = partners[restore.partner].raw.get(key)
            fixed.direct.append(restore.fix)
    to_newest, to_first = _fix_prefix(plan, prefix, fixed)
    if to_newest and own < len(rest):
        rest[-1] = _with_text(rest[-1], to_newest, at_end=True)
    if to_first and first_user_is_own:
        index = next(i for i in range(own, len(rest)) if rest[i].get("role") == "user")
        rest[index] = _with_text(rest[index], to_first, at_end=False)
    tools = _fix_tools(plan, tools, fixed)
    fixed_messages = [*prefix, *rest]
    if fixed.changed:
        fixed.request, fixed.body = _rebuilt(request, fixed_messages, tools, raw_changes)
    sent_rest = list(messages[head:])
    rest_changed = fixed.changed and exact(rest) != exact(sent_rest)
    kept = Kept(
        sent_rest,
        rest if rest_changed else sent_rest,
        prefix,
        {**request.raw, **raw_changes},
        list(dict.fromkeys([*rest_fixes, *fixed.direct])) if rest_changed else [],
    )
    return fixed, kept


def _append_only(partner: Kept, rest: list[dict[str, Any]]) -> tuple[list, int] | None:
    """The partner's fixed messages followed by what this request adds after the last message
    it shares with the partner; None when it shares none."""
    for back, message in enumerate(reversed(partner.rest)):
        sent = exact(message)
        for index in range(len(rest) - 1, -1, -1):
            if exact(rest[index]) == sent:
                kept = len(partner.rest) - back
                shift = len(partner.fixed_rest) - len(partner.rest)
                head = partner.fixed_rest[: kept + shift]
                return [*head, *rest[index + 1 :]], len(head)
        if back >= 8:
            break
    return None


def _fix_prefix(plan: FixPlan, prefix: list[dict[str, Any]], fixed: Fixed) -> tuple[str, str]:
    """Move the values out of the system messages and undo their drift, in place; (text for
    the newest turn, text for the first user turn)."""
    to_newest, to_first = [], []
    kinds = plan.slot_kinds
    for slot, message in enumerate(prefix):
        text = message.get("content")
        if not isinstance(text, str):
            continue
        original = text
        for move in plan.moves:
            if move.slot != slot:
                continue
            text, taken = move.take(text)
            if taken:
                fixed.direct.append(move.fix)
                fixed.moved[move.fix] = taken.strip()
                if move.cause == "clock":
                    to_newest.append(taken.strip())
                elif move.cause == "per_user":
                    to_first.append(taken.strip())
        for cause in kinds:
            found = plan.slot_variants.get((cause, text_key(NORMALIZERS[cause](text))))
            if found is not None and found[0] != text:
                canonical, fix = found
                for move in plan.moves:
                    if move.slot == slot:
                        canonical = move.take(canonical)[0]
                if canonical != text:
                    text = canonical
                    fixed.direct.append(fix)
                break
        if text != original:
            message["content"] = text
    return "\n".join(to_newest), "\n".join(to_first)


def _with_text(message: dict[str, Any], text: str, at_end: bool) -> dict[str, Any]:
    content = message.get("content")
    message = dict(message)
    if isinstance(content, str) or content is None:
        content = content or ""
        message["content"] = f"{content}\n\n{text}" if at_end else f"{text}\n\n{content}"
    elif isinstance(content, list):
        part = {"type": "text", "text": text}
        message["content"] = [*content, part] if at_end else [part, *content]
    return message


def _fix_tools(plan: FixPlan, tools: list[Any], fixed: Fixed) -> list[Any]:
    if not tools:
        return tools
    result = []
    for tool in tools:
        name = tool_name(tool)
        if plan.tool_name_ids:
            tool, name = _without_alias(plan, tool, name, fixed)
        value = plan.tool_values.get(name)
        if value is not None:
            cleaned = _clean_description(tool, value.clean)
            if cleaned is not tool:
                fixed.direct.append(value.fix)
                tool = cleaned
        variants = plan.tool_variants.get(name)
        if variants:
            key = exact(tool)
            stable = plan.stable_definition(name)
            if key in variants and stable is not None and key != stable:
                fixed.direct.append(variants[key])
                tool = plan.samples[(name, stable)]
        result.append(tool)
    names = [tool_name(tool) for tool in result]
    present = frozenset(names)
    for sides, full, fix in plan.tool_sets:
        if present in sides and present != frozenset(full):
            by_name = {tool_name(tool): tool for tool in result}
            for name in full:
                if name not in by_name:
                    sample = _sample(plan, name)
                    if sample is not None:
                        by_name[name] = sample
            result = [by_name[name] for name in full if name in by_name]
            fixed.direct.append(fix)
            names, present = [tool_name(tool) for tool in result], frozenset(by_name)
            break
    fix = plan.tool_orders.get(present)
    if fix is not None or any(present in sides for sides, _, _ in plan.tool_sets):
        stable = plan.stable_order(present)
        if stable is not None and tuple(names) != stable:
            position = {name: index for index, name in enumerate(stable)}
            result = sorted(result, key=lambda tool: position.get(tool_name(tool), len(position)))
            if fix is not None:
                fixed.direct.append(fix)
    return result


def _without_alias(plan: FixPlan, tool: Any, name: str, fixed: Fixed) -> tuple[Any, str]:
    """The tool with the random id of its name dropped, when a fix names it."""
    family = FAMILIES["random_id"]
    if not values_of(family, name):
        return tool, name
    fix = plan.tool_name_ids.get(masked(family, name))
    if fix is None or not isinstance(tool, dict):
        return tool, name
    stable = masked(family, name).replace("\0", "")
    fixed.direct.append(fix)
    if isinstance(tool.get("function"), dict):
        return {**tool, "function": {**tool["function"], "name": stable}}, stable
    return {**tool, "name": stable}, stable


def _sample(plan: FixPlan, name: str) -> Any:
    """The tool a full tool set adds: its first definition in the log."""
    first = plan.first_definitions.get(name)
    return plan.samples.get((name, first)) if first is not None else None


def _clean_description(tool: Any, clean) -> Any:
    if not isinstance(tool, dict):
        return tool
    if isinstance(tool.get("function"), dict):
        function = tool["function"]
        description = function.get("description")
        if isinstance(description, str) and clean(description) != description:
            return {**tool, "function": {**function, "description": clean(description)}}
        return tool
    description = tool.get("description")
    if isinstance(description, str) and clean(description) != description:
        return {**tool, "description": clean(description)}
    return tool


def chat_body(request: Request, messages, tools, raw_changes: dict[str, Any]) -> dict[str, Any]:
    """A Chat Completions body of the request (its rendered parameters and sidecar kept)."""
    if _is_chat_body(request):
        body = dict(request.raw)
    else:
        body = {key: request.raw[key] for key in RENDERED_PARAMETERS if key in request.raw}
        if request.model is not None:
            body["model"] = request.model
        if request.cache_salt is not None:
            body["cache_salt"] = request.cache_salt
    body.update(raw_changes)
    body["messages"] = messages
    if tools or "tools" in body:
        body["tools"] = tools
    if request.session_id is not None and "session_id" not in body:
        body["session_id"] = request.session_id
    if request.timestamp is not None and "timestamp" not in body:
        body["timestamp"] = request.timestamp
    return body


def _rebuilt(request: Request, messages, tools, raw_changes) -> tuple[Request, dict[str, Any]]:
    """The fixed request (the normalized request with its messages and tools replaced, as
    pcache renders every shape) and the Chat Completions body `--write-fixed` writes for it
    (a Chat Completions body reads back as exactly this request)."""
    body = chat_body(request, messages, tools, raw_changes)
    raw = body if _is_chat_body(request) else {**request.raw, **raw_changes}
    return dataclasses.replace(request, messages=messages, tools=tools, raw=raw), body


def _is_chat_body(request: Request) -> bool:
    """The request's body is a Chat Completions body (at the top of its line or under a batch
    line's `body`)."""
    return request.kind == KIND_OPENAI and request.shape == "chat" and "messages" in request.raw


def written_body(fixed: Fixed) -> dict[str, Any]:
    """The body `--write-fixed` writes for a request of the fixed log."""
    if fixed.body is not None:
        return fixed.body
    request = fixed.request
    if request.shape in STANDALONE_SHAPES:
        body = dict(request.raw)  # as sent: it reads back as it was linted
        for key in ("session_id", "timestamp"):
            if getattr(request, key) is not None and key not in body:
                body[key] = getattr(request, key)
        return body
    return chat_body(request, request.messages, request.tools, {})


@dataclass(slots=True)
class Outcome:
    """One request of the pass: as is and fixed."""

    number: int
    fixed: Fixed
    context: Any
    """The request as sent, rendered (`RequestContext`)."""
    tokens: list[int]
    fixed_tokens: list[int]
    fixed_reused: int
    saving: int
    """Tokens it re-prefills less in the fixed log (negative: more)."""
    holder_fixes: tuple[Fix, ...]
    """For a request no fix changed: the fixes that changed the request it reuses in the fixed
    log (a gain), or the one it reused as is (a loss)."""


class FixedLog:
    """The second pass: the requests fixed, rendered and looked up request by request."""

    def __init__(self, plan: FixPlan, settings, models, lifetime_ms, predecessors, needed, holders):
        from pcache.cache.reuse import PrefixIndex

        self.plan = plan
        self.settings = settings
        self.models = models
        self.index = PrefixIndex(settings.block_size, lifetime_ms)
        self.predecessors = predecessors
        """Each request's session predecessor (its number; -1: a session's first request)."""
        self.needed = needed
        """How many later requests repeat each request's fixed form (by number)."""
        self.holders = holders
        """The request holding each request's longest prefix in the log as is."""
        self.kept: dict[int, Kept] = {}
        self.changed_by: dict[int, tuple[Fix, ...]] = {}
        """The fixes that changed each changed request (one tuple per distinct set)."""
        self.sets: dict[tuple[Fix, ...], tuple[Fix, ...]] = {}
        self.number = 0
        """The next request's number (a log replayed in pieces goes on from the last)."""

    def replay(self, requests: Iterator[Request], lost: list[int]) -> Iterator[Outcome]:
        from pcache.cache.reuse import reusable
        from pcache.errors import InputError
        from pcache.rules.context import RequestContext

        for request in requests:
            number = self.number
            context = RequestContext(request, self.settings)
            try:
                tokens = context.token_ids
            except InputError:
                continue  # not rendered in the first pass either
            previous = self.predecessors[number]
            fixed, kept = fixed_request(
                self.plan, number, request, self.kept.get(previous), self.kept
            )
            fixed_tokens = tokens
            if fixed.changed:
                fixed_tokens = RequestContext(fixed.request, self.settings).token_ids
            namespace = fixed.request.cache_salt
            if self.index.lifetime_ms is not None:
                self.index.expire(request.timestamp)
            match = self.index.match(fixed_tokens, namespace)
            profile = self.models.of(request.model)
            reused = reusable(profile, match.length, len(fixed_tokens), self.settings.block_size)
            saving = lost[number] - (len(fixed_tokens) - reused)
            source = match.holder if saving > 0 else self.holders[number]
            holder = self.changed_by.get(source, ()) if source is not None else ()
            inserted = self.index.insert(match, request.timestamp)
            assert inserted == number, (inserted, number)
            if fixed.changed:
                fixes = tuple(dict.fromkeys([*fixed.direct, *fixed.carried]))
                self.changed_by[number] = self.sets.setdefault(fixes, fixes)
            self._keep(number, kept, previous)
            self.number += 1
            yield Outcome(number, fixed, context, tokens, fixed_tokens, reused, saving, holder)

    def _keep(self, number: int, kept: Kept, previous: int) -> None:
        for used in {previous, *(r.partner for r in self.plan.restores.get(number, ()))}:
            if used in self.kept:
                self.needed[used] -= 1
                if self.needed[used] <= 0:
                    del self.kept[used]
        if self.needed[number] > 0:
            self.kept[number] = kept
