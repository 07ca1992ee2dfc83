"""The log as is, through the cache: what each request reuses, and the requests it could reuse.

What a request reuses is what an unlimited, serial replay of the log reuses
(`pcache.cache.reuse`): the longest token prefix it shares with any earlier prompt of its cache
namespace, whatever the session or user, rounded by the profile's granularity. The earlier
request holding that prefix is one of the requests lint explains a request against
(`pcache.rules.defects`); what fixing the defects saves is the replay of the fixed log
(`pcache.rules.fixed_replay`), never an estimate.

What a request re-prefills is split here into what no fix could give back: the first request
of a cache namespace (nothing to reuse), and the shared tokens the cache's granularity cannot
reuse (partial blocks, the last-token rule). The rest is new content until a fix saves it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from pcache.cache.profiles import ModelMinimums, longest_ttl_seconds
from pcache.cache.reuse import Match, PrefixIndex, reusable

if TYPE_CHECKING:
    from pcache.cache.profiles import Profile
    from pcache.rules.context import RequestContext

FORGET_EVERY = 256
"""Requests between two passes that forget the requests the cache can no longer name as the
holder of a prefix (at least: the passes are further apart when the cache holds more)."""


@dataclass(slots=True)
class Earlier:
    """What lint keeps of a cached request: enough to render it again."""

    context: RequestContext
    session: str


@dataclass(slots=True)
class Settled:
    """What one request re-prefills as is, and how much of it no fix could give back."""

    reused: int
    lost: int
    first: bool
    """The first request of its cache namespace."""
    granular: int
    """Shared tokens the cache's granularity loses."""


class Costs:
    """The cache of the log as is, request after request."""

    def __init__(self, profile: Profile, block_size: int):
        self.profile = profile
        self.models = ModelMinimums(profile)
        """The profile of each request's model (its minimum prefix, where the data file lists
        one by model)."""
        lifetime = longest_ttl_seconds(profile.name)
        self.lifetime_ms = None if lifetime is None else lifetime * 1000.0
        self.index = PrefixIndex(block_size, self.lifetime_ms)
        """Forgets a prefix no request used for the profile's longest cache lifetime, when the
        requests have timestamps (`PrefixIndex.expire`): no cache could hit it any more."""
        self.earlier: dict[int, Earlier] = {}
        """Each cached request (by its number), while the cache can still name it as the
        holder of a prefix."""
        self.forget_at = FORGET_EVERY
        self.namespaces: set[str | None] = set()

    def match(self, current: RequestContext) -> Match:
        """The longest cached prefix of the request (before it is settled), once what expired
        before it was sent is forgotten."""
        if self.index.lifetime_ms is not None:
            self.index.expire(current.request.timestamp)
        return self.index.match(current.token_ids, current.request.cache_salt)

    @property
    def num_settled(self) -> int:
        """Requests settled so far (the next one's number)."""
        return self.index.num_prompts

    def holder(self, found: Match) -> Earlier | None:
        return self.earlier.get(found.holder) if found.holder is not None else None

    def settle(self, current: RequestContext, found: Match) -> Settled:
        """What the request reuses (`found`: `match(current)`), then cache it."""
        tokens = current.token_ids
        namespace = current.request.cache_salt
        profile = self.models.of(current.request.model)
        reused = reusable(profile, found.length, len(tokens), self.index.block_size)
        granular = max(min(found.length, len(tokens)) - reused, 0)
        first = namespace not in self.namespaces
        number = self.index.insert(found, current.request.timestamp)
        assert number not in self.earlier
        self.earlier[number] = Earlier(current, current.session)
        self.namespaces.add(namespace)
        self._drop_released()
        return Settled(reused, len(tokens) - reused, first, granular)

    def _drop_released(self) -> None:
        """Every `FORGET_EVERY` requests or more, forget those the cache can no longer return
        as a holder (what sessions extend and identical prompts repeat): memory follows the
        distinct prefixes, not the requests."""
        if self.index.num_prompts < self.forget_at:
            return
        live = self.index.live_holders()
        held = len(self.index.holders)
        self.forget_at = self.index.num_prompts + max(FORGET_EVERY, held // FORGET_EVERY)
        for number in [number for number in self.earlier if number not in live]:
            del self.earlier[number]
