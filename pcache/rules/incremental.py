"""Lint a log that grows: one lint pass kept open, fed the log piece by piece (`pcache watch`).

Each piece's requests go through the pass exactly as the next requests of a file go through
`pcache lint`: the session tracker, the cache of the log as is (which forgets what outlived
the profile's longest cache lifetime) and the fix plan go on from the last piece. The piece is
then replayed in the fixed log, which also goes on from the last piece, with the fixes known
by then: a fix first found in a later piece changes the later requests only. So every figure
only grows, and each request is charged once; `pcache lint` of the whole file applies every fix
to every request, and can charge a fix a little more where it was first seen.

What the pass holds follows one window: the profile's longest cache lifetime, or `window_s`
(`DEFAULT_WINDOW_S` for profiles without one: `pcache lint` keeps their cache unlimited). A
prefix and a session no request used for that long (by the requests' timestamps) are forgotten.

What lint does once at the end of a whole log is done per piece here:
- what a fix costs in some request of the fixed log (block boundaries it moved) is taken off
  what the same rule's fixes saved in the same piece; the rest waits for later pieces
  (`unpaid_tokens`), so a rule's total never falls;
- a clock or id that never changes keeps its finding (it is charged nothing);
- the findings are kept for the pieces' replay only, then the latest `KEEP_RECENT` are kept
  to show: what the pass holds follows the cache lifetime and the open sessions, not the log.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict, deque
from dataclasses import dataclass, field

from pcache.errors import InputError
from pcache.prompt.shapes.request import Request
from pcache.rules.base import Diagnostic
from pcache.rules.config import LintConfig
from pcache.rules.fixed_replay import FixedLog, Kept
from pcache.rules.groups import GroupTotal
from pcache.rules.runner import LintOptions, _Run
from pcache.rules.summary import RuleTotal

KEEP_RECENT = 50
"""Latest findings kept to show."""
DEFAULT_WINDOW_S = 3600.0
"""How long a prefix unused is kept when the profile names no cache lifetime (a server's cache
holds by capacity, not time; a watch must forget)."""
KEEP_OPEN = 4096
"""Requests whose fixed form is kept for a later request of their session to repeat (the
latest request of each of the most recently active sessions)."""


class FollowedLog(FixedLog):
    """The fixed log of a log read in pieces. At the end of a whole log, lint knows which
    requests a later one repeats; at the end of a piece nobody does, so each request's fixed
    form is kept until its session's next request is replayed (or `KEEP_OPEN` later
    requests have pushed it out)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.open: OrderedDict[int, None] = OrderedDict()

    def _keep(self, number: int, kept: Kept, previous: int) -> None:
        if previous in self.open:  # its session went on
            self._release(previous)
        super()._keep(number, kept, previous)
        self.needed[number] += 1
        self.kept[number] = kept
        self.open[number] = None
        while len(self.open) > KEEP_OPEN:
            self._release(next(iter(self.open)))

    def _release(self, number: int) -> None:
        del self.open[number]
        self.needed[number] -= 1
        if self.needed[number] <= 0:
            self.kept.pop(number, None)


@dataclass(slots=True)
class FollowedTotals:
    """What the pass found so far."""

    profile: str
    tokenizer: str
    block_size: int
    requests: int = 0
    sessions: int = 0
    prompt_tokens: int = 0
    reusable_tokens: int = 0
    prompt_tokens_if_fixed: int = 0
    reusable_tokens_if_fixed: int = 0
    requests_changed_if_fixed: int = 0
    unpaid_tokens: int = 0
    """What fixes cost more in some requests than their rule's fixes saved since."""
    unreadable: int = 0
    """Lines and requests that could not be read or rendered (PC000)."""
    failing: int = 0
    """Findings that would fail `pcache lint` (errors and warnings, info of rules selected
    explicitly)."""
    rules: list[RuleTotal] = field(default_factory=list)
    group_by: tuple[str, ...] = ()
    groups: list[GroupTotal] = field(default_factory=list)
    observed_requests: int = 0
    observed_prompt_tokens: int = 0
    observed_cached_tokens: int = 0
    predicted_cached_tokens: int = 0
    observed_disagreeing: int = 0
    recent: list[Diagnostic] = field(default_factory=list)
    """The latest findings, newest last."""

    @property
    def reprefilled_tokens(self) -> int:
        return self.prompt_tokens - self.reusable_tokens

    @property
    def attributed_tokens(self) -> int:
        return sum(total.tokens_reprefilled for total in self.rules)

    @property
    def unattributed_tokens(self) -> int:
        return max(self.reprefilled_tokens - self.attributed_tokens, 0)

    @property
    def cacheable_ratio(self) -> float:
        return self.reusable_tokens / self.prompt_tokens if self.prompt_tokens else 0.0

    @property
    def cacheable_ratio_if_fixed(self) -> float:
        total = self.prompt_tokens_if_fixed
        return self.reusable_tokens_if_fixed / total if total else 0.0


class FollowedLint:
    """One lint pass, fed pieces of a log in order (`add`), its totals read between them."""

    def __init__(
        self,
        options: LintOptions,
        config: LintConfig | None = None,
        window_s: float | None = None,
    ):
        self.run = _Run(options, config or LintConfig(), None)
        lifetime_ms = self.run.costs.lifetime_ms
        if window_s is not None or lifetime_ms is None:
            lifetime_ms = 1000.0 * (window_s or DEFAULT_WINDOW_S)
            self.run.forget_after(lifetime_ms)
        self.window_s = lifetime_ms / 1000.0
        """How long a prefix or a session no request used is kept (with timestamps)."""
        self.fixed = self.run.fixed_log(FollowedLog)
        self.recent: deque[Diagnostic] = deque(maxlen=KEEP_RECENT)
        self.failing_earlier = 0
        """Failing findings no longer kept."""
        self.unreadable = 0

    def add(self, items: list[Request | InputError]) -> None:
        """Lint the requests (and the unreadable lines) of one piece, in log order, then
        replay them in the fixed log."""
        run = self.run
        for item in items:
            if isinstance(item, InputError):
                self.unreadable += 1
            run.lint_item(item)
        before = {code: total.tokens_reprefilled for code, total in run.totals.items()}
        requests = [item for item in items if isinstance(item, Request)]
        run.replay_fixed(self.fixed, iter(requests), None)
        for code, debt in list(run.debts.items()):
            total = run.totals[code]
            paid = min(debt, total.tokens_reprefilled - before.get(code, 0))
            total.tokens_reprefilled -= paid
            if debt > paid:
                run.debts[code] = debt - paid
            else:
                del run.debts[code]
        run.check_findings.clear()  # their requests are replayed
        run.fixed_findings.clear()
        self._forget_replayed()
        self._keep_recent()

    def _forget_replayed(self) -> None:
        """Drop what only the requests already replayed needed: their restores (and the fixes
        made for them alone), where fixes first changed a request once the fix has its
        finding or nothing can carry it any more, and the fixed sets of requests the fixed
        log's cache can no longer return."""
        run, fixed = self.run, self.fixed
        plan = run.plan
        dead = set()
        for number in [number for number in plan.restores if number < fixed.number]:
            dead.update(restore.fix for restore in plan.restores.pop(number))
        if dead:
            plan.fixes = [fix for fix in plan.fixes if fix not in dead]
        carried = {fix for kept in fixed.kept.values() for fix in kept.fixes}
        live = carried.union(plan.fixes)
        for fix in [fix for fix in run.first_changes if fix.diagnostic or fix not in live]:
            del run.first_changes[fix]
        holders = fixed.index.live_holders()
        fixed.changed_by = {n: fixes for n, fixes in fixed.changed_by.items() if n in holders}
        fixed.sets = {fixes: fixes for fixes in fixed.changed_by.values()}

    def _keep_recent(self) -> None:
        run = self.run
        self.recent.extend(d for d in run.diagnostics if d.listed)
        self.failing_earlier += sum(1 for d in run.diagnostics if self._fails(d))
        run.diagnostics.clear()  # so none goes unlisted past KEEP_FINDINGS

    def _fails(self, diagnostic: Diagnostic) -> bool:
        return diagnostic.severity != "info" or diagnostic.code in self.run.explicit

    def totals(self) -> FollowedTotals:
        """The figures so far (copies: the pass goes on without changing them)."""
        run = self.run
        summary = run.summary
        observed = summary.observed
        groups = run.request_groups
        return FollowedTotals(
            profile=summary.profile,
            tokenizer=summary.tokenizer,
            block_size=summary.block_size,
            requests=summary.requests,
            sessions=summary.sessions,
            prompt_tokens=summary.prompt_tokens,
            reusable_tokens=summary.reusable_tokens,
            prompt_tokens_if_fixed=summary.prompt_tokens_if_fixed,
            reusable_tokens_if_fixed=summary.reusable_tokens_if_fixed,
            requests_changed_if_fixed=summary.requests_changed_if_fixed,
            unpaid_tokens=sum(run.debts.values()),
            unreadable=self.unreadable,
            failing=self.failing_earlier + run.failing_not_listed,
            rules=[dataclasses.replace(run.totals[code]) for code in sorted(run.totals)],
            group_by=groups.keys if groups is not None else (),
            groups=[_copy(total) for total in groups.ranked()] if groups is not None else [],
            observed_requests=observed.requests,
            observed_prompt_tokens=observed.prompt_tokens,
            observed_cached_tokens=observed.observed_tokens,
            predicted_cached_tokens=observed.predicted_tokens,
            observed_disagreeing=observed.disagreeing,
            recent=[dataclasses.replace(d) for d in self.recent],
        )


def _copy(total: GroupTotal) -> GroupTotal:
    return dataclasses.replace(
        total,
        key=dict(total.key),
        rule_tokens=dict(total.rule_tokens),
        rule_counts=dict(total.rule_counts),
    )
