"""Charging: each re-prefilled token goes to the divergence that lost it, once.

What a request reuses is what an unlimited, serial replay of the log reuses
(`pcache.cache.reuse`): the longest token prefix it shares with any earlier prompt of its cache
namespace, whatever the session or user. The earlier prompt that holds that prefix (P) is where
the request (R) would have kept reading had it not diverged; `pcache.divergence.classify`
names why it diverged there. When the cause is a defect (a rule reports it), undoing it means
splicing back what P has in the changed unit (`splice`), so that the rest realigns, and
looking the spliced prompt up in the same cache; the rule is charged the tokens that saves.
The spliced prompt may stop at a second divergence (from P or another prompt), which is
classified and undone in turn. A token is charged at most once. What stays unattributed: the
first request of a cache namespace (nothing to reuse), content no earlier request could have
supplied (new turns, other conversations' own messages), and the shared tokens the cache's
granularity cannot reuse (partial blocks, the last-token rule).

"If fixed" replays the log with every reported divergence undone: each request is walked again
against a second cache holding the fixed versions of the earlier requests, and the fixed
version is cached there. `Costs` keeps both caches and settles each request in turn.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from pcache.cache.profiles import ModelMinimums, longest_ttl_seconds
from pcache.cache.reuse import Match, PrefixIndex, reusable
from pcache.divergence.classify import Divergence
from pcache.rules.splice import Edit, apply, from_original, splice, to_original

if TYPE_CHECKING:
    from pcache.cache.profiles import Profile
    from pcache.rules.base import Rule
    from pcache.rules.context import RequestContext

MIN_SHARED_CONTENT = 24
"""Characters of the changed part itself that must follow an undone change in the realigned
prefix when nothing of a later part does: realigning over template text alone (a value at the
very end of the last shared message) saves nothing worth moving the value for."""
FORGET_EVERY = 256
"""Requests between two passes that forget the requests no cache can name any more (at least:
a pass reads every holder of the caches, so that they are read `FORGET_EVERY` times per
request at most, the passes are further apart when the caches hold more)."""
MAX_STEPS = 16
"""Divergences undone per request at most (each one must save tokens)."""


@dataclass(slots=True)
class Earlier:
    """What lint keeps of a request once it is cached: enough to render it again."""

    context: RequestContext
    session: str
    edits: list[Edit] = field(default_factory=list)
    """Its fixed version: the divergences undone in the fixed log."""
    fixed: list[int] | None = None
    """The fixed version's tokens while kept (None: recomputed from `edits`)."""

    taken: list[tuple[int, ...]] = field(default_factory=list)
    """The tokens each edit put in (parallel to `edits`)."""
    num_tokens: int = 0
    """The length of the request as sent."""

    def tokens(self, fixed: bool) -> list[int]:
        tokens = self.context.token_ids
        if not fixed or not self.edits:
            return tokens
        if self.fixed is None:
            self.fixed = apply(tokens, self.edits, self.taken)
        return self.fixed

    def length(self, fixed: bool) -> int:
        """`len(self.tokens(fixed))`, without rendering the request again."""
        if not fixed:
            return self.num_tokens
        return self.num_tokens + sum(edit.taken - edit.dropped for edit in self.edits)


@dataclass(slots=True)
class Charge:
    """A divergence undone in one request: what it saved, and who held the prefix."""

    divergence: Divergence
    rule: Rule
    tokens: int
    holder: Earlier
    position: int
    """The token of the request (as sent) where it diverged."""


@dataclass(slots=True)
class Walk:
    """A request with the divergences it could undo undone."""

    tokens: list[int]
    match: Match
    reused: int
    charges: list[Charge]
    edits: list[Edit]
    taken: list[tuple[int, ...]]


Classify = Callable[["Earlier", int, int], "tuple[Divergence, Rule | None] | None"]
"""(earlier request, token there, token of the request) -> the divergence and its rule."""
Content = Callable[[int, int], bool]
"""Whether the request's tokens [start, end) (as sent) hold content worth realigning."""


def walk(
    index: PrefixIndex,
    profile: Profile,
    tokens: list[int],
    namespace: str | None,
    earlier: Mapping[int, Earlier],
    fixed: bool,
    classify: Classify,
    undoes: Callable[[Rule], bool],
    content: Content,
    found: Match | None = None,
) -> Walk:
    """Undo, divergence after divergence, what the rules explain (see the module); `found`:
    the request's match in `index`, when already computed."""
    size = index.block_size
    found = found if found is not None else index.match(tokens, namespace)
    result = Walk(tokens, found, reusable(profile, found.length, len(tokens), size), [], [], [])
    for _ in range(MAX_STEPS):
        if result.match.holder is None:
            break
        holder = earlier.get(result.match.holder)
        assert holder is not None, result.match.holder  # a holder is never dropped
        divergence_at = result.match.length
        if divergence_at >= holder.length(fixed) or divergence_at >= len(result.tokens):
            break  # the earlier prompt ends here: what follows is this request's own
        repeated = _repeated_change(holder, result.tokens, divergence_at) if fixed else None
        if repeated is not None:  # the request repeats a change undone in the earlier one
            reference = holder.tokens(fixed)
            candidate = [
                *result.tokens[: repeated.start],
                *reference[repeated.start : repeated.start + repeated.taken],
                *result.tokens[repeated.start + repeated.dropped :],
            ]
            match = index.match(candidate, namespace)
            reused = reusable(profile, match.length, len(candidate), size)
            if (len(candidate) - reused) >= (len(result.tokens) - result.reused):
                break
            result.edits.append(repeated)
            result.taken.append(tuple(reference[repeated.start : repeated.start + repeated.taken]))
            result.tokens, result.match, result.reused = candidate, match, reused
            continue
        at_request = to_original(result.edits, divergence_at)
        at_holder = to_original(holder.edits, divergence_at) if fixed else divergence_at
        if at_request is None or at_holder is None:
            break
        classified = classify(holder, at_holder, at_request)
        if classified is None:
            break
        divergence, rule = classified
        if rule is None or not undoes(rule):
            break
        reference = holder.tokens(fixed)
        end = from_original(result.edits, divergence.b_end)
        reference_end = from_original(holder.edits, divergence.a_end) if fixed else divergence.a_end
        spliced = splice(reference, result.tokens, divergence_at, end, reference_end)
        if spliced is None:
            break
        candidate, taken, dropped = spliced
        match = index.match(candidate, namespace)
        reused = reusable(profile, match.length, len(candidate), size)
        saved = (len(result.tokens) - result.reused) - (len(candidate) - reused)
        if saved <= 0:
            break
        shared_after = match.length - (divergence_at + taken)
        if shared_after <= 0 or not content(at_request, at_request + dropped + shared_after):
            break
        result.edits.append(Edit(divergence_at, taken, dropped, rule))
        result.taken.append(tuple(reference[divergence_at : divergence_at + taken]))
        result.charges.append(Charge(divergence, rule, saved, holder, at_request))
        result.tokens, result.match, result.reused = candidate, match, reused
    return result


def _repeated_change(holder: Earlier, tokens: Sequence[int], position: int) -> Edit | None:
    """The holder's undone change that `position` falls in, when `tokens` hold there what the
    holder sent before the change was undone (a later request repeating an earlier value)."""
    for number, edit in enumerate(holder.edits):
        if edit.start <= position < edit.start + max(edit.taken, 1):
            sent = holder.context.token_ids
            start = to_original(holder.edits[:number], edit.start)
            assert start is not None
            if tokens[edit.start : edit.start + edit.dropped] == sent[start : start + edit.dropped]:
                return edit
            return None
    return None


@dataclass(slots=True)
class Settled:
    """What one request cost, as is and in the fixed log."""

    reused: int
    charges: list[Charge]
    """The reported divergences undone in the request, with what each is charged."""
    unattributed: dict[str, int]
    fixed_tokens: int
    fixed_reused: int
    changed: bool
    rounded: int = 0
    """Shared tokens the granularity loses, for the rounding finding to take."""
    credit: tuple[int, str, int] | None = None
    """(earlier request, rule code, tokens) this request saves in the fixed log because of an
    earlier request's fix: added to that finding."""


class Costs:
    """The cache of the log and the cache of the fixed log, request after request."""

    def __init__(self, profile: Profile, block_size: int):
        self.profile = profile
        self.models = ModelMinimums(profile)
        """The profile of each request's model (its minimum prefix, where the data file lists
        one by model)."""
        lifetime = longest_ttl_seconds(profile.name)
        self.index = PrefixIndex(block_size, None if lifetime is None else lifetime * 1000.0)
        """Forgets a prefix no request used for the profile's longest cache lifetime, when the
        requests have timestamps (`PrefixIndex.expire`): no cache could hit it any more."""
        self.fixed_index: PrefixIndex | None = None
        """The fixed log's cache; the same as `index` until a fix changes a request."""
        self.earlier: dict[int, Earlier] = {}
        """Each cached request (by its number), while a cache can still find it as the holder
        of a prefix."""
        self.expired_nodes = 0
        """Prefix nodes the cache forgot after the lifetime (`PrefixIndex.expire`)."""
        self.forget_at = FORGET_EVERY
        """The number of cached requests at which the next forgetting pass runs."""
        self.namespaces: set[str | None] = set()
        self.debts: dict[str, int] = {}
        """Tokens the fixed log costs more than the log in some requests, by rule: taken off
        the rule's next charges, so that a rule's total is what its fix saves in all."""

    def _repay(self, charges: list[Charge]) -> list[Charge]:
        """The charges less what their rules owe (`debts`); those left with nothing dropped."""
        for charge in charges:
            charge.tokens = self._repay_tokens(charge.rule.code, charge.tokens)
        return [charge for charge in charges if charge.tokens > 0]

    def match(self, current: RequestContext) -> Match:
        """The longest cached prefix of the request (before it is settled), once what expired
        before it was sent is forgotten."""
        now = current.request.timestamp
        if self.index.lifetime_ms is not None:
            self.expired_nodes += self.index.expire(now)
            if self.fixed_index is not None:
                self.fixed_index.expire(now)
        return self.index.match(current.token_ids, current.request.cache_salt)

    @property
    def num_settled(self) -> int:
        """Requests settled so far (the next one's number)."""
        return self.index.num_prompts

    def settle(
        self,
        current: RequestContext,
        found: Match,
        classify: Classify,
        content: Content,
        reports: Callable[[Rule], bool],
        rounding: bool,
    ) -> Settled:
        """Charge the request's divergences, replay its fixed version, then cache both
        (`found`: `match(current)`).

        `reports(rule)`: whether a divergence of this rule is reported (the fixed log undoes
        only those); `rounding`: a finding takes the shared tokens the granularity loses."""
        tokens = current.token_ids
        namespace = current.request.cache_salt
        size = self.index.block_size
        profile = self.models.of(current.request.model)
        actual = walk(
            self.index,
            profile,
            tokens,
            namespace,
            self.earlier,
            False,
            classify,
            _always,
            content,
            found,
        )
        reused = reusable(profile, found.length, len(tokens), size)
        fixed = self._fixed(current, actual, classify, content, reports)
        lost = len(tokens) - reused
        saved = min(lost, lost - (len(fixed.tokens) - fixed.reused))
        if saved < 0:  # the fix moved block boundaries: this request pays a few tokens more
            undone = [edit.rule for edit in fixed.edits if edit.rule is not None]
            if undone:
                self.debts[undone[0].code] = self.debts.get(undone[0].code, 0) - saved
            saved = 0
        carriers = fixed.charges or [c for c in actual.charges if reports(c.rule)]
        charges = self._repay(distribute(saved, carriers))
        credit = None
        if saved and not carriers:  # better reuse thanks to an earlier request's fix
            credit = self._credit(fixed, saved)
        charged = sum(charge.tokens for charge in charges) + (credit[2] if credit else 0)
        unreported = sum(c.tokens for c in actual.charges if not reports(c.rule))
        unreported = min(unreported, lost - charged)
        left = lost - charged - unreported
        granular = max(min(fixed.match.length, len(fixed.tokens)) - fixed.reused, 0)
        granular = min(granular, left)
        first = namespace not in self.namespaces
        unattributed = dict.fromkeys(("first_request", "new_content", "partial_blocks"), 0)
        unattributed["unreported"] = unreported
        rounded = 0
        if first:
            unattributed["first_request"] = left
        elif rounding:
            unattributed["new_content"] = left - granular
            rounded = granular
        else:
            unattributed["partial_blocks"] = granular
            unattributed["new_content"] = left - granular
        now = current.request.timestamp
        number = self.index.insert(found, now)
        assert number not in self.earlier
        edits = [
            edit if edit.origin is not None or edit.rule is None else replace(edit, origin=number)
            for edit in fixed.edits
        ]
        self.earlier[number] = Earlier(
            current, current.session, edits, None, fixed.taken, len(tokens)
        )
        self.namespaces.add(namespace)
        self._drop_released()
        return Settled(
            reused,
            charges,
            unattributed,
            len(fixed.tokens),
            fixed.reused,
            fixed.tokens is not tokens,
            rounded,
            credit,
        )

    def _drop_released(self) -> None:
        """Every `FORGET_EVERY` requests or more (see it), forget those no cache can return as
        a holder any more (what sessions extend and identical prompts repeat): memory follows
        the distinct prefixes, not the requests."""
        if self.index.num_prompts < self.forget_at:
            return
        live = self.index.live_holders()
        held = len(self.index.holders)
        if self.fixed_index is not None:
            live |= self.fixed_index.live_holders()
            held += len(self.fixed_index.holders)
        self.forget_at = self.index.num_prompts + max(FORGET_EVERY, held // FORGET_EVERY)
        for number in [number for number in self.earlier if number not in live]:
            del self.earlier[number]

    def _credit(self, fixed: Walk, saved: int) -> tuple[int, str, int] | None:
        """(request, rule code, tokens): the earlier finding whose fix gave this request the
        better reuse it has in the fixed log (the request its fixed prefix was found in)."""
        holder = fixed.match.holder
        held = self.earlier.get(holder) if holder is not None else None
        if held is None:
            return None
        for edit in [*fixed.edits, *held.edits]:
            if edit.rule is not None and edit.origin is not None:
                tokens = self._repay_tokens(edit.rule.code, saved)
                return (edit.origin, edit.rule.code, tokens) if tokens else None
        return None

    def _repay_tokens(self, code: str, tokens: int) -> int:
        """`tokens` less what rule `code` owes, the debt reduced by as much."""
        debt = self.debts.get(code, 0)
        paid = min(debt, tokens)
        if paid:
            self.debts[code] = debt - paid
        return tokens - paid

    def _fixed(self, current, actual: Walk, classify: Classify, content, reports) -> Walk:
        """The request in the fixed log, replayed through the fixed log's cache."""
        tokens = current.token_ids
        namespace = current.request.cache_salt
        profile = self.models.of(current.request.model)
        undone_all = all(reports(charge.rule) for charge in actual.charges)
        if self.fixed_index is None and undone_all:
            fixed = actual  # the fixed log is the log so far: the same walk
            if actual.charges:
                self.fixed_index = self.index.copy()
        else:
            if self.fixed_index is None:
                self.fixed_index = self.index.copy()
            plain = self.fixed_index.match(tokens, namespace)
            fixed = walk(
                self.fixed_index,
                profile,
                tokens,
                namespace,
                self.earlier,
                True,
                classify,
                reports,
                content,
                plain,
            )
            plain_reused = reusable(profile, plain.length, len(tokens), self.index.block_size)
            if len(tokens) - plain_reused < len(fixed.tokens) - fixed.reused:
                fixed = Walk(tokens, plain, plain_reused, [], [], [])  # undoing cannot help here
        if self.fixed_index is not None:
            match = fixed.match
            if fixed is actual:
                match = self.fixed_index.match(fixed.tokens, namespace)
            self.fixed_index.insert(match, current.request.timestamp)
        return fixed


def distribute(tokens: int, carriers: Sequence[Charge]) -> list[Charge]:
    """`tokens` split over `carriers` in proportion to what undoing each saved (the first
    takes the remainder): the charges of one request add up to what its fix saves."""
    if not carriers or tokens <= 0:
        return []
    weights = [max(charge.tokens, 0) for charge in carriers]
    if not any(weights):
        weights = [1] * len(carriers)
    total = sum(weights)
    shares = [tokens * weight // total for weight in weights]
    shares[0] += tokens - sum(shares)
    return [
        Charge(c.divergence, c.rule, share, c.holder, c.position)
        for c, share in zip(carriers, shares, strict=True)
        if share > 0
    ]


def _always(rule: Rule) -> bool:
    return True
