"""What a lint run found, in totals: the summary the JSON output holds and the report reads."""

from __future__ import annotations

from dataclasses import dataclass, field

from pcache.defaults import DEFAULT_BLOCK_SIZE
from pcache.rules.base import Diagnostic
from pcache.rules.groups import GroupTotal
from pcache.rules.money import MoneySummary
from pcache.rules.observed import ObservedUsage


@dataclass(slots=True)
class RuleTotal:
    code: str
    name: str
    count: int = 0
    tokens_reprefilled: int = 0


IF_FIXED_ASSUMES = (
    "the fix each finding names applied to every request it changes (clocks moved to the"
    " newest turn, ids dropped, per-user data moved into the first user turn, tools in one"
    " stable order and set, drifted text and edited history sent as first sent), then the"
    " fixed log (--write-fixed) replayed through an unlimited cache (that forgets a prefix"
    " unused for longer than the profile's longest cache lifetime, when the profile has one"
    " and the requests have timestamps)"
)
UNATTRIBUTED = ("first_request", "new_content", "partial_blocks", "unreported")
"""Re-prefilled tokens no finding is charged: a cache namespace's first request, content no fix
gives back, and shared tokens the cache's granularity loses (`unreported` stays 0: the fixed log
applies only the selected rules' fixes, so what others would save is new content)."""


@dataclass(slots=True)
class LintSummary:
    """Totals of a run.

    `prompt_tokens - reusable_tokens` (re-prefilled) is split exactly into the per-rule totals
    and `unattributed_tokens` (by the kind of request that paid them). "If fixed" is a replay
    of the log with the fix each finding names applied (`IF_FIXED_ASSUMES`).
    """

    files: int = 0
    requests: int = 0
    sessions: int = 0
    prompt_tokens: int = 0
    reusable_tokens: int = 0
    unattributed: dict[str, int] = field(default_factory=lambda: dict.fromkeys(UNATTRIBUTED, 0))
    prompt_tokens_if_fixed: int = 0
    reusable_tokens_if_fixed: int = 0
    requests_changed_if_fixed: int = 0
    profile: str = ""
    tokenizer: str = ""
    block_size: int = DEFAULT_BLOCK_SIZE
    rules: list[RuleTotal] = field(default_factory=list)
    fixed_files: list[str] = field(default_factory=list)
    skipped_tables: list[str] = field(default_factory=list)
    """Tables a directory search left out because pyarrow is not installed."""
    stage_seconds: dict[str, float] = field(default_factory=dict)
    observed: ObservedUsage = field(default_factory=ObservedUsage)
    """The log's own cached-token counts beside the prediction (`requests` 0: none reported)."""
    unpaid_tokens: int = 0
    """What fixes cost more in some requests of the fixed log than all their findings saved
    (block boundaries a fix moved): the findings' tokens exceed the fixed log's saving by it."""
    findings_not_listed: int = 0
    """Findings past the first `KEEP_FINDINGS` the run lists (in the rule totals only)."""
    group_by: tuple[str, ...] = ()
    groups: list[GroupTotal] = field(default_factory=list)
    """The totals per group of requests (`--group-by`), most re-prefilled tokens first."""
    money: MoneySummary = field(default_factory=MoneySummary)
    """The input cost as is and if fixed, per rule and group (`pcache.rules.money`)."""

    @property
    def reprefilled_tokens(self) -> int:
        return self.prompt_tokens - self.reusable_tokens

    @property
    def unattributed_tokens(self) -> int:
        return sum(self.unattributed.values())

    @property
    def cacheable_ratio(self) -> float:
        return self.reusable_tokens / self.prompt_tokens if self.prompt_tokens else 0.0

    @property
    def cacheable_ratio_if_fixed(self) -> float:
        total = self.prompt_tokens_if_fixed
        return self.reusable_tokens_if_fixed / total if total else 0.0

    def as_dict(self) -> dict[str, object]:
        return {
            "files": self.files,
            "requests": self.requests,
            "sessions": self.sessions,
            "prompt_tokens": self.prompt_tokens,
            "reusable_tokens": self.reusable_tokens,
            "reprefilled_tokens": self.reprefilled_tokens,
            "attributed_tokens": sum(t.tokens_reprefilled for t in self.rules),
            "unattributed_tokens": self.unattributed_tokens,
            "unattributed_by_reason": dict(self.unattributed),
            "cacheable_ratio": round(self.cacheable_ratio, 6),
            "if_fixed": {
                "assumes": IF_FIXED_ASSUMES,
                "requests_changed": self.requests_changed_if_fixed,
                "prompt_tokens": self.prompt_tokens_if_fixed,
                "reusable_tokens": self.reusable_tokens_if_fixed,
                "cacheable_ratio": round(self.cacheable_ratio_if_fixed, 6),
            },
            "profile": self.profile,
            "tokenizer": self.tokenizer,
            "block_size": self.block_size,
            "rules": [
                {
                    "code": t.code,
                    "name": t.name,
                    "count": t.count,
                    "tokens_reprefilled": t.tokens_reprefilled,
                }
                for t in self.rules
            ],
            "fixed_files": self.fixed_files,
            "money": self.money.as_dict(),
            **({"skipped_tables": self.skipped_tables} if self.skipped_tables else {}),
            **({"observed": self.observed.as_dict()} if self.observed.requests else {}),
            **({"unpaid_tokens": self.unpaid_tokens} if self.unpaid_tokens else {}),
            **(
                {"findings_not_listed": self.findings_not_listed}
                if self.findings_not_listed
                else {}
            ),
            **(
                {
                    "groups": {
                        "by": list(self.group_by),
                        "rows": [group.as_dict() for group in self.groups],
                    }
                }
                if self.group_by
                else {}
            ),
        }


@dataclass(slots=True)
class LintReport:
    diagnostics: list[Diagnostic]
    summary: LintSummary
    failing: int = 0
    """Findings that fail the run: errors and warnings, and info findings of rules selected
    explicitly."""
