"""Why a request's prompt tokens were not served from the cache: one reason per missed token.

A replay through the vLLM block pool (`pcache.replayer.simulate.policies.VllmPolicy`) is
watched by a `MissLedger`: after each admission it reads the pool's events (which blocks the
admission evicted) and sorts the prompt's blocks that were not hits:

- `never_cached`: no earlier request computed the block (its first occurrence, or the prompt
  changed before it: the hash chains, so every block after a change is new);
- `evicted`: an earlier request computed it, and an admission evicted it before this request
  came (`evicted_by` names the admissions);
- `not_yet_published`: a request still prefilling it had not published it (SGLang inserts a
  prefill into its tree after the forward pass; `prefilling` names the requests);
- `last_block`: the prompt's last block, which no engine serves from its cache: a partial block
  is never cached, and the block holding the last token is computed again for its logits;
- `other_replica` and `unexplained` are the server's side (`explain_served`): tokens the
  replay had cached that a request behind a router did not get (it was routed to a replica
  that did not hold them), or that a server did not serve for no reason the replay knows.

A block after a missed one that the pool still holds (the chain was broken before it) takes
the reason of the block that broke the chain. The reasons of a request add up to its missed
tokens: prompt tokens minus cached tokens.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

REASONS = {
    "never_cached": "never cached before (first occurrence, or the prompt changed before it)",
    "evicted": "evicted before the request came",
    "not_yet_published": "still being prefilled by an earlier request",
    "other_replica": "cached on another replica than the one the request was routed to",
    "last_block": "the prompt's last block (partial, or holding the last token)",
    "unexplained": "cached in the replay, not served by the server",
}
"""Every reason, in the order reports list them, with what it means."""


@dataclass(slots=True)
class MissReasons:
    """One request's missed tokens: runs of (first token, end token, reason), in prompt order,
    from the first token not served to the end of the prompt, and the requests they name."""

    runs: list[tuple[int, int, str]] = field(default_factory=list)
    evicted_by: list[int] = field(default_factory=list)
    """Requests (trace positions) whose admission evicted a block this one needed."""
    prefilling: list[int] = field(default_factory=list)
    """Requests still prefilling a block this one needed."""
    hit_from: list[tuple[int, int, int]] = field(default_factory=list)
    """Runs (first token, end token, request) of the cached tokens: who computed them."""

    def add(self, start: int, end: int, reason: str) -> None:
        if end <= start:
            return
        runs = self.runs
        if runs and runs[-1][2] == reason and runs[-1][1] == start:
            runs[-1] = (runs[-1][0], end, reason)
        else:
            runs.append((start, end, reason))

    def tokens(self) -> dict[str, int]:
        """Missed tokens by reason (reasons with none left out), in `REASONS`' order."""
        counts = dict.fromkeys(REASONS, 0)
        for start, end, reason in self.runs:
            counts[reason] += end - start
        return {reason: count for reason, count in counts.items() if count}

    def from_token(self, first: int) -> MissReasons:
        """The reasons of the tokens from `first` on (a server that served more than the
        replay: its missed tokens are the replay's last ones)."""
        kept = MissReasons(evicted_by=self.evicted_by, prefilling=self.prefilling)
        for start, end, reason in self.runs:
            kept.add(max(start, first), end, reason)
        return kept

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"tokens": self.tokens()}
        if self.evicted_by:
            data["evicted_by"] = self.evicted_by
        if self.prefilling:
            data["prefilling"] = self.prefilling
        return data


def reason_tokens(reasons: MissReasons | dict[str, Any] | None) -> dict[str, int]:
    """Missed tokens by reason of one request's reasons, or of their JSON form (a
    per-request line read back: `{"tokens": {...}}`); empty for None."""
    if reasons is None:
        return {}
    if isinstance(reasons, MissReasons):
        return reasons.tokens()
    tokens = reasons.get("tokens") if isinstance(reasons, dict) else None
    if not isinstance(tokens, dict):
        return {}
    return {
        reason: count
        for reason, count in tokens.items()
        if reason in REASONS and type(count) is int and count > 0
    }


def summed(reasons: Iterable[MissReasons | None]) -> dict[str, int]:
    """Missed tokens by reason over requests, every reason listed."""
    total = dict.fromkeys(REASONS, 0)
    for one in reasons:
        if one is not None:
            for reason, count in one.tokens().items():
                total[reason] += count
    return total


def reason_shares(total: dict[str, int], counts: bool = True) -> str:
    """`evicted 30 (75.0%), never cached 10 (25.0%)` (without `counts`: `evicted 75.0%, ...`),
    largest first; empty when nothing was missed."""
    missed = sum(total.values())
    ordered = sorted(((count, reason) for reason, count in total.items() if count), key=_first)
    return ", ".join(
        f"{reason.replace('_', ' ')} {count:,} ({count / missed:.1%})"
        if counts
        else f"{reason.replace('_', ' ')} {count / missed:.1%}"
        for count, reason in ordered
    )


def _first(pair: tuple[int, str]) -> int:
    return -pair[0]


def summary_line(total: dict[str, int]) -> str:
    """`missed tokens: 40: evicted 30 (75.0%), never cached 10 (25.0%)`, largest first."""
    missed = sum(total.values())
    if not missed:
        return "missed tokens: none"
    return f"missed tokens: {missed:,}: {reason_shares(total)}"


class MissLedger:
    """The history of one pool's blocks, as a replay admits requests into it: who computed
    each block last, who evicted it (while it is out of the pool), and the admissions whose
    blocks are not published yet."""

    def __init__(self, detail: bool = False):
        self.computed_by: dict[Hashable, int] = {}
        self.evicted_by: dict[Hashable, int] = {}
        self.computing: dict[Hashable, tuple[int, Any]] = {}
        """Blocks of deferred admissions: (position, admission), until it is published."""
        self.detail = detail
        """Keep `MissReasons.hit_from` (who computed the cached tokens)."""

    def admitted(
        self,
        position: int,
        keys: Sequence[Hashable],
        prompt_tokens: int,
        block_size: int,
        hit_blocks: int,
        cached_tokens: int,
        cacheable_blocks: int,
        events: Iterable[tuple],
        admission: Any = None,
    ) -> MissReasons:
        """The reasons of one admission's misses, then what it changed in the pool.

        `keys`: its blocks' keys (prompt blocks first; generated blocks may follow);
        `cacheable_blocks`: how many of the prompt's blocks a hit can cover; `events`: the
        pool's events since the last call; `admission`: its `Admission`, when its blocks wait
        to be published (`Admission.unpublished`)."""
        reasons = MissReasons()
        if self.detail:
            for number in range(hit_blocks):
                by = self.computed_by.get(keys[number], -1)
                start = number * block_size
                end = min(start + block_size, cached_tokens)
                runs = reasons.hit_from
                if runs and runs[-1][2] == by and runs[-1][1] == start:
                    runs[-1] = (runs[-1][0], end, by)
                else:
                    runs.append((start, end, by))
        broken = None
        for number in range(hit_blocks, min(cacheable_blocks, len(keys))):
            start = max(number * block_size, cached_tokens)
            end = min(number * block_size + block_size, prompt_tokens)
            if end <= start:
                break  # blocks past the prompt's tokens (a hash-id trace's last ids)
            reason = self._reason(keys[number], reasons) or broken or "unexplained"
            broken = broken or reason
            reasons.add(start, end, reason)
        tail = max(min(cacheable_blocks, len(keys)) * block_size, cached_tokens)
        reasons.add(tail, prompt_tokens, "last_block")
        self._apply(position, keys, hit_blocks, events, admission)
        return reasons

    def _reason(self, key: Hashable, reasons: MissReasons) -> str | None:
        computing = self.computing.get(key)
        if computing is not None and computing[1].unpublished is not None:
            if computing[0] not in reasons.prefilling:
                reasons.prefilling.append(computing[0])
            return "not_yet_published"
        by = self.evicted_by.get(key)
        if by is not None:
            if by not in reasons.evicted_by:
                reasons.evicted_by.append(by)
            return "evicted"
        if key not in self.computed_by:
            return "never_cached"
        return None  # in the pool, behind a block that was not: the chain was broken

    def _apply(
        self,
        position: int,
        keys: Sequence[Hashable],
        hit_blocks: int,
        events: Iterable[tuple],
        admission: Any,
    ) -> None:
        for event in events:
            if event[0] == "BlockRemoved":
                self.evicted_by[event[1]] = position
            elif event[0] == "AllBlocksCleared":
                self.computed_by.clear()
                self.evicted_by.clear()
        computing = self.computing
        for key in keys[hit_blocks:]:
            self.computed_by[key] = position
            self.evicted_by.pop(key, None)
            if admission is not None and admission.unpublished is not None:
                computing[key] = (position, admission)
            else:
                computing.pop(key, None)
        if len(computing) > 4 * len(self.computed_by) // 3 + 1024:  # published ones go
            for key in [k for k, (_, held) in computing.items() if held.unpublished is None]:
                del computing[key]


def explain_served(
    replayed: MissReasons,
    predicted: int,
    served: int,
    prompt_tokens: int,
    behind_router: bool,
    raced: list[int],
) -> tuple[MissReasons, str | None]:
    """The reasons of the tokens a server did not serve, from the replay's reasons of the same
    request (which served `predicted` tokens), and why the two differ (None: they agree).

    `raced`: the requests in flight with this one that the replay let compute the tokens in
    question first (when the server served fewer), or that the replay served them to (more):
    which of two requests sent together reaches the scheduler first is the server's race.
    Tokens the replay served and the server did not are `not_yet_published` when raced,
    `other_replica` behind a router, else `unexplained`."""
    served = max(0, min(served, prompt_tokens))
    if served >= predicted:
        kept = replayed.from_token(served)
        if served == predicted:
            return kept, None
        if raced:
            return kept, (
                f"the server served {served - predicted:,} tokens more than the replay: sent"
                f" with request {', '.join(map(str, raced))}, which the server let compute them"
                " first (the replay, this one)"
            )
        counted = replayed.from_token(predicted).tokens()
        shown = ", ".join(f"{r.replace('_', ' ')} {n:,}" for r, n in counted.items())
        return kept, (
            f"the server served {served - predicted:,} tokens more than the replay"
            f" (the replay's misses from token {predicted}: {shown or 'none'})"
        )
    reasons = MissReasons(evicted_by=replayed.evicted_by, prefilling=list(replayed.prefilling))
    if raced:
        reason = "not_yet_published"
        reasons.prefilling.extend(r for r in raced if r not in reasons.prefilling)
        why = (
            f"sent with request {', '.join(map(str, raced))}, which the replay let compute"
            " them first (the server, this one)"
        )
    elif behind_router:
        reason, why = "other_replica", "routed to a replica that did not hold them"
    else:
        reason, why = "unexplained", "the replay had them cached"
    reasons.add(served, predicted, reason)
    for start, end, kind in replayed.runs:
        reasons.add(start, end, kind)
    return reasons, f"the server served {predicted - served:,} tokens fewer than the replay: {why}"
