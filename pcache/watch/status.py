"""What a watch knows at one moment: the lint figures so far and how the log was followed."""

from __future__ import annotations

from dataclasses import dataclass, field

from pcache.rules.incremental import FollowedTotals
from pcache.watch.follow import FollowStats


@dataclass(slots=True)
class WatchStatus:
    log: str
    totals: FollowedTotals
    follow: FollowStats = field(default_factory=FollowStats)
    waiting: bool = False
    """The log does not exist (yet)."""
    polls: int = 0
    last_poll: float | None = None
    """When the last poll ended (seconds since the epoch)."""
    started: float = 0.0
    interval: float = 0.0
    window: float = 0.0
    """Seconds a prefix or a session no request used is kept."""
    group_labels: dict[str, str] = field(default_factory=dict)
    """Each `--group-by` key's Prometheus label name."""

    def as_dict(self) -> dict[str, object]:
        totals = self.totals
        return {
            "log": self.log,
            "waiting": self.waiting,
            "polls": self.polls,
            "last_poll": self.last_poll,
            "started": self.started,
            "interval": self.interval,
            "window": self.window,
            "follow": {
                "files": self.follow.files,
                "lines_read": self.follow.lines_read,
                "bytes_read": self.follow.bytes_read,
                "rotations": self.follow.rotations,
                "truncations": self.follow.truncations,
            },
            "profile": totals.profile,
            "tokenizer": totals.tokenizer,
            "block_size": totals.block_size,
            "requests": totals.requests,
            "sessions": totals.sessions,
            "lines_skipped": totals.unreadable,
            "prompt_tokens": totals.prompt_tokens,
            "reusable_tokens": totals.reusable_tokens,
            "reprefilled_tokens": totals.reprefilled_tokens,
            "attributed_tokens": totals.attributed_tokens,
            "unattributed_tokens": totals.unattributed_tokens,
            "unpaid_tokens": totals.unpaid_tokens,
            "cacheable_ratio": round(totals.cacheable_ratio, 6),
            "if_fixed": {
                "requests_changed": totals.requests_changed_if_fixed,
                "prompt_tokens": totals.prompt_tokens_if_fixed,
                "reusable_tokens": totals.reusable_tokens_if_fixed,
                "cacheable_ratio": round(totals.cacheable_ratio_if_fixed, 6),
            },
            "rules": [
                {
                    "code": t.code,
                    "name": t.name,
                    "count": t.count,
                    "tokens_reprefilled": t.tokens_reprefilled,
                }
                for t in totals.rules
            ],
            "observed": {
                "requests": totals.observed_requests,
                "prompt_tokens": totals.observed_prompt_tokens,
                "observed_cached_tokens": totals.observed_cached_tokens,
                "predicted_reusable_tokens": totals.predicted_cached_tokens,
                "disagreeing_requests": totals.observed_disagreeing,
            },
            "groups": {
                "by": list(totals.group_by),
                "rows": [group.as_dict() for group in totals.groups],
            },
            "failing": totals.failing,
            "recent_findings": [d.as_dict() for d in totals.recent],
        }
