"""Cost attribution: which finding each re-prefilled token is charged to, and the log if fixed.

What a request reuses is what an unlimited, serial replay of the log reuses
(`pcache.cache.reuse`). A request re-prefills everything after the longest prefix it shares
with an earlier prompt; the finding that names the text where that prefix ends (its first
divergence) is charged the tokens that undoing its change saves. Undoing means splicing back
what the request's reference (the previous request of its session, or for a session's first
request the latest other session's first request) had there, so that the rest realigns
(`splice`), then looking the spliced prompt up in the same cache. When the spliced prompt ends
at a second named divergence, the finding there is charged what undoing that one saves in turn.
A token is charged at most once; what no finding explains (the log's first request, each
session's own content, each turn's new messages, partial blocks) stays unattributed.

"If fixed" is the same splicing applied to every request against the fixed version of its
reference, replayed through a second cache: a replay of fixed prompts, not a sum of costs.
`Costs` keeps both caches and settles each request in turn; the runner only reports.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pcache.cache.reuse import Match, PrefixIndex, reusable
from pcache.prefix import common_prefix_length, common_run_length

if TYPE_CHECKING:
    from pcache.cache.profiles import Profile
    from pcache.rules.base import Diagnostic, Violation
    from pcache.rules.context import LintContext, RequestContext

SLACK = 4
"""Tokens a divergence may lie before the text a finding names (BPE merges across a change)."""
ANCHOR = 8
"""Tokens of the reference that must reappear in the request for the rest to realign."""


def splice(
    reference: Sequence[int], tokens: Sequence[int], start: int, end: int, reference_end: int
):
    """Undo the change at `start`, which lies in `tokens[start:end]` and, in the reference, in
    `reference[start:reference_end]` (the text a finding names): `(spliced, a, b)` with
    `spliced = tokens[:start] + reference[start:start+a] + tokens[start+b:]`,
    `start + b <= end` and `start + a <= reference_end`, where the rest of the reference
    realigns so that `spliced` shares the longest prefix with it; None when nothing of the
    reference after `start` reappears there."""
    if start >= len(reference):
        return None
    width = min(ANCHOR, len(reference) - start)
    last = min(end, len(tokens) - width)
    best = None
    a = start
    while a <= reference_end and a + width <= len(reference):
        b = _find(tokens, reference[a : a + width], start, last)
        if b is None:
            a += 1
            continue
        matched = common_run_length(reference, a, tokens, b)
        if best is None or a + matched > best[0]:
            best = (a + matched, a - start, b - start)
            if a + matched == len(reference):
                break  # realigned to the reference's end: nothing can share more
        a += max(matched, 1)
    if best is None:
        return None
    _, taken, dropped = best
    spliced = [*tokens[:start], *reference[start : start + taken], *tokens[start + dropped :]]
    return spliced, taken, dropped


def _find(tokens: Sequence[int], anchor: Sequence[int], low: int, high: int) -> int | None:
    """First `b` in `[low, high]` where `tokens[b:]` starts with `anchor`."""
    width, head = len(anchor), anchor[0]
    position = low
    while position <= high:
        try:
            position = tokens.index(head, position, high + 1)
        except ValueError:
            return None
        if tokens[position : position + width] == anchor:
            return position
        position += 1
    return None


@dataclass(slots=True)
class Claim:
    """A finding that may explain a divergence: the tokens of the text it names, and where
    that text ends in the request's reference."""

    diagnostic: Diagnostic
    start: int
    end: int
    reference_end: int


def claim_at(claims: list[Claim], divergence: int) -> Claim | None:
    """The finding whose text holds the divergence (the innermost when several do)."""
    holding = [c for c in claims if c.start - SLACK <= divergence <= c.end]
    return max(holding, key=lambda c: (c.start, -c.end), default=None)


@dataclass(slots=True)
class Undone:
    """A request with the changes its findings name undone, and what that saves."""

    token_ids: list[int]
    match: Match
    reused: int
    charged: list[tuple[Diagnostic, int]]
    """(finding, tokens saved by undoing its change), in the order they were undone."""


def undo(
    index: PrefixIndex,
    profile: Profile,
    tokens: list[int],
    namespace: str | None,
    found: Match,
    reference: Sequence[int] | None,
    claims: list[Claim],
    inherited: int = 0,
    reference_length: int | None = None,
) -> Undone:
    """Undo, divergence after divergence, the changes that `claims` name (see the module).

    `inherited`: the request repeats its reference as actually sent up to this token, so where
    it differs before it from `reference` (a fixed version), it repeats a change undone in an
    earlier request: that is undone too, charged to nobody. `reference_length`: the length of
    the reference as sent when `reference` is a fixed version (claims' reference positions
    are positions in what was sent).
    """
    if reference_length is None and reference is not None:
        reference_length = len(reference)
    size = index.block_size
    reused = reusable(profile, found.length, len(tokens), size)
    undone = Undone(tokens, found, reused, [])
    open_claims = [Claim(c.diagnostic, c.start, c.end, c.reference_end) for c in claims]
    moved = len(reference) - reference_length if reference is not None else 0
    while reference is not None:
        divergence = undone.match.length
        claim = claim_at(open_claims, divergence)
        if claim is not None:
            end, reference_end = claim.end + 1, claim.reference_end + 1 + moved
        elif divergence < inherited:
            end, reference_end = inherited, inherited + moved
        else:
            break
        spliced = splice(reference, undone.token_ids, divergence, end, reference_end)
        if spliced is None:
            break
        candidate, taken, dropped = spliced
        match = index.match(candidate, namespace)
        reused = reusable(profile, match.length, len(candidate), size)
        saved = (len(undone.token_ids) - undone.reused) - (len(candidate) - reused)
        if saved <= 0:
            break
        end_of_change = divergence + dropped
        if inherited >= end_of_change:
            inherited += taken - dropped
        if claim is not None:
            open_claims.remove(claim)
            undone.charged.append((claim.diagnostic, saved))
        for other in open_claims:
            if other.start >= end_of_change:
                other.start += taken - dropped
                other.end += taken - dropped
        undone.token_ids, undone.match, undone.reused = candidate, match, reused
    return undone


def text_span(
    current: RequestContext, violation: Violation, position: int | None
) -> tuple[int, int] | None:
    """First and last token of the text a finding names (None: it names no text): what was
    rendered from its path, or else from the nearest enclosing path rendered."""
    if violation.at_template or not current.is_chat or not violation.json_path:
        return None if position is None else (position, position + SLACK)
    path = violation.json_path
    if path.endswith("]") and "[" in path:  # an element: the change may move the others
        path = path[: path.rindex("[")]
    spans = current.rendered.spans
    chars = [
        (s.start, s.end)
        for s in spans
        if s.path == path or s.path.startswith((path + ".", path + "["))
    ]
    if not chars:
        enclosing = [s for s in spans if path.startswith((s.path + ".", s.path + "["))]
        longest = max((len(s.path) for s in enclosing), default=0)
        chars = [(s.start, s.end) for s in enclosing if len(s.path) == longest]
    if not chars:
        return None if position is None else (position, position + SLACK)
    first = current.token_of_char(min(start for start, _ in chars))
    last = current.token_of_char(max(end for _, end in chars) - 1)
    if position is not None:
        first = min(first, position)
    return first, last


def claim_for(
    diagnostic: Diagnostic,
    violation: Violation,
    position: int | None,
    current: RequestContext,
    reference: RequestContext | None,
) -> Claim | None:
    """What a finding may explain: the text it names here and in the request's reference."""
    span = text_span(current, violation, position)
    if span is None:
        return None
    reference_end = len(current.token_ids)
    if reference is not None:
        named = text_span(reference, violation, None)
        reference_end = max(named[1], span[1]) if named else len(reference.token_ids)
    return Claim(diagnostic, *span, reference_end)


@dataclass(slots=True)
class Settled:
    """What one request cost, as is and in the fixed log."""

    reused: int
    charged: list[tuple[Diagnostic, int]]
    unattributed: int
    fixed_tokens: int
    fixed_reused: int
    changed: bool


class Costs:
    """The cache of the log and the cache of the fixed log, request after request."""

    def __init__(self, profile: Profile, block_size: int):
        self.profile = profile
        self.index = PrefixIndex(block_size)
        self.fixed_index: PrefixIndex | None = None
        """The fixed log's cache; the same as `index` until a fix changes a request."""

    def match(self, current: RequestContext) -> Match:
        """The longest cached prefix of the request (before it is settled)."""
        return self.index.match(current.token_ids, current.request.cache_salt)

    def settle(
        self,
        current: RequestContext,
        found: Match,
        reference: RequestContext | None,
        claims: list[Claim],
        rounding: list[Diagnostic],
    ) -> Settled:
        """Charge the findings of the request, replay its fixed version, then cache both."""
        tokens = current.token_ids
        namespace = current.request.cache_salt
        if self.index.num_prompts == 0:  # the log's first request is never blamed
            claims, rounding = [], []
        references = reference.token_ids if reference is not None else None
        reused = reusable(self.profile, found.length, len(tokens), self.index.block_size)
        undone = undo(self.index, self.profile, tokens, namespace, found, references, claims)
        charged = list(undone.charged)
        left = len(tokens) - reused - sum(saved for _, saved in charged)
        if rounding and not charged:  # the shared tokens the granularity could not reuse
            lost = min(max(min(found.length, len(tokens)) - reused, 0), left)
            charged.append((rounding[0], lost))
            left -= lost
        assert left >= 0, left
        fixed = self._fixed(current, undone, reference, claims)
        self.index.insert(found)
        return Settled(
            reused, charged, left, len(fixed.token_ids), fixed.reused, fixed.token_ids is not tokens
        )

    def _fixed(self, current, undone: Undone, reference, claims) -> Undone:
        """The request in the fixed log, replayed through the fixed log's cache."""
        tokens = current.token_ids
        if self.fixed_index is None:  # the fixed log is the log so far: `undone` holds
            if undone.token_ids is not tokens:
                self.fixed_index = self.index.copy()
        else:
            fixed_reference, inherited, sent = None, 0, None
            if reference is not None:
                fixed_reference = reference.fixed_token_ids or reference.token_ids
                sent = len(reference.token_ids)
                if reference.fixed_token_ids is not None:
                    inherited = common_prefix_length(tokens, reference.token_ids)
            namespace = current.request.cache_salt
            match = self.fixed_index.match(tokens, namespace)
            undone = undo(
                self.fixed_index,
                self.profile,
                tokens,
                namespace,
                match,
                fixed_reference,
                claims,
                inherited,
                sent,
            )
        if undone.token_ids is not tokens:
            current.fixed_token_ids = undone.token_ids
        if self.fixed_index is not None:
            self.fixed_index.insert(undone.match)
        return undone


def expected_shared(context: LintContext) -> int:
    """Tokens of the current request a cache could reuse if nothing broke (an upper bound).

    After an earlier request of the session: its prompt, and on engines that cache generated
    tokens (vLLM, SGLang) also its reply. For a session's first request: the tools and system
    prompt that every session shares.
    """
    current = context.current
    if not current.is_chat:
        return 0
    num_tokens = len(current.token_ids)
    if context.previous is None:
        return current.tokens_before_message(current.first_turn_index)
    expected = min(len(context.previous.token_ids), num_tokens)
    if context.settings.profile.granularity in ("block", "token"):
        with_reply = min(len(context.previous.messages) + 1, len(current.messages))
        expected = max(expected, current.tokens_before_message(with_reply))
    return expected
