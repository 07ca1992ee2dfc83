"""What a router sees of one request, and of the fleet, when it routes.

`RoutedRequest` carries the request as each kind of router reads it:
- the *text view* (`units`, `unit_chars`): the characters character-keyed routers hash or walk
  (SGLang, KubeAI, Ray, llm-d approximate). For a request trace it is the joined text of the
  messages (or the prompt), with no chat template, as `TraceRecord.routing_text` holds it. A
  hash-id trace has no text: each hash id stands for the characters of its block,
  `block_size x chars_per_token` of them (the last block: its share of `input_length`), and
  two blocks share characters exactly when they share an id.
- `session_id`, the record's session (sticky routers);
- `cached_tokens`: the tokens of this prompt each replica's pool holds now, as the engine
  counts them (the exact token-block index a KV-event router builds).

`FleetState` is what the router tracks itself: requests in flight per replica (incremented at
dispatch, decremented at completion; always 0 when the next request of a serial replay
arrives), the blocks they hold, and requests routed so far.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pcache.defaults import DEFAULT_CHARS_PER_TOKEN
from pcache.traces.record import TraceRecord

__all__ = ["DEFAULT_CHARS_PER_TOKEN", "FleetState", "RoutedRequest", "text_view"]


@dataclass(slots=True)
class RoutedRequest:
    """One request as the routers see it."""

    record: TraceRecord
    units: Sequence
    """The text view: a string, or one hash id per block."""
    unit_chars: Sequence[int] | None
    """Characters of each unit (None: one per unit, a string)."""
    text_chars: int
    cached_tokens: list[int]
    """Per replica: the tokens of this prompt its pool would serve from cache now."""
    now_ms: float

    @property
    def session_id(self) -> str | None:
        return self.record.session_id

    def leading_text(self, num_chars: int) -> tuple:
        """The first `num_chars` characters of the text view, as a hashable key."""
        if self.unit_chars is None:
            return (str(self.units[:num_chars]),)
        taken, key = 0, []
        for unit, chars in zip(self.units, self.unit_chars, strict=True):
            if taken >= num_chars:
                break
            key.append(unit)
            taken += chars
        return (*key, min(taken, num_chars))


@dataclass(slots=True)
class FleetState:
    """Router-tracked load: requests in flight and requests routed, per replica."""

    in_flight: list[int]
    routed: list[int]
    active_blocks: list[int]
    """Prompt blocks of the requests in flight, per replica (Dynamo's decode blocks)."""
    block_size: int = 1
    """The engines' block size (token blocks of the pools)."""
    capacity_blocks: int | None = None
    """Each replica's pool capacity (None: unlimited)."""

    @classmethod
    def empty(
        cls, num_replicas: int, block_size: int = 1, capacity_blocks: int | None = None
    ) -> FleetState:
        zeros = [0] * num_replicas
        return cls(zeros, list(zeros), list(zeros), block_size, capacity_blocks)

    @property
    def num_replicas(self) -> int:
        return len(self.in_flight)

    def least_loaded(self, candidates: Sequence[int] | None = None) -> int:
        """The candidate with the fewest requests in flight; ties to the first (as Rust's
        `min_by_key`, which the SGLang router's load fallback uses)."""
        pool = range(self.num_replicas) if candidates is None else candidates
        return min(pool, key=self.in_flight.__getitem__)


def text_view(
    record: TraceRecord, block_size: int | None, chars_per_token: int
) -> tuple[Sequence, Sequence[int] | None, int]:
    """`RoutedRequest`'s units, their characters and the total, for `record`."""
    if record.hash_ids is not None:
        assert block_size is not None
        hash_ids = record.hash_ids
        if not hash_ids:
            return (), (), 0
        full = block_size * chars_per_token
        last = max(record.input_length - (len(hash_ids) - 1) * block_size, 1) * chars_per_token
        chars = [full] * (len(hash_ids) - 1) + [min(last, full)]
        return hash_ids, chars, sum(chars)
    text = record.routing_text
    if text is None:  # token ids without text: the ids joined by spaces, as SGLang does
        text = " ".join(map(str, record.token_ids or ()))
    return text, None, len(text)
