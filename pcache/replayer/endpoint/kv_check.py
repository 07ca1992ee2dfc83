"""Block by block: what the server's KV events say it stored and evicted, against pcache's pool.

Blocks are compared by their token prefix (the tokens of the block and of every block before
it), which any server's events carry: a `BlockStored` gives each block's tokens and its
parent's hash, so a chain of server hashes resolves to a prefix. pcache's side is the
prediction's own replay (`Replayed`: the same pool, of the server's size, that predicted each
request's cached tokens, serial or on the run's timeline), whose stored and removed blocks
are read from its pool's events. Counts are multisets of block copies: a block stored again
after its eviction counts twice, and so does a block a request recomputed while a copy was
cached (vLLM keeps both; so does pcache).

- matched: stored (removed) blocks that both sides stored (removed);
- mismatches: blocks one side stored (removed) and the other did not. Blocks that extend past
  every prompt (generated tokens the prediction does not know) are counted apart.
- hashes: where the server names its hash algorithm (`cache_config_info`'s
  `prefix_caching_hash_algo`) and pcache implements it, each stored block's wire hash is
  recomputed from its tokens and compared; else blocks are compared by tokens only.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pcache.cache.hashing import HASH_ALGOS, HashSettings, block_hashes
from pcache.serve.kv_event_wire import wire_hash


@dataclass(frozen=True, slots=True)
class Replayed:
    """The prediction's replay as the check reads it: its pool's events (`BlockPool`'s
    tuples, keyed by the pool's block keys), the keys of each prompt's full blocks, and what
    sized its pool."""

    events: Sequence[tuple]
    keys: Sequence[Sequence[Hashable]]
    pool: str = ""


class BlockIndex:
    """Interns token-block prefixes: a prefix id per (parent id, block tokens)."""

    def __init__(self) -> None:
        self.ids: dict[tuple[int, tuple[int, ...]], int] = {}
        self.known: set[int] = set()

    def chain(self, tokens: Sequence[int], block_size: int, parent: int = -1) -> list[int]:
        ids = []
        for start in range(0, len(tokens) - block_size + 1, block_size):
            key = (parent, tuple(tokens[start : start + block_size]))
            parent = self.ids.setdefault(key, len(self.ids))
            ids.append(parent)
        return ids


@dataclass(slots=True)
class KVEventCheck:
    """The outcome; `to_dict` is its JSON."""

    endpoint: str
    events_received: dict[str, int]
    batches: int
    missed_batches: int
    undecodable: int
    block_size: int
    num_blocks: int | None
    compared_by: str
    stored_matched: int = 0
    stored_missing: int = 0
    stored_unexpected: int = 0
    removed_matched: int = 0
    removed_missing: int = 0
    removed_unexpected: int = 0
    generated_blocks: int = 0
    unresolved_blocks: int = 0
    hashes_compared: int = 0
    hashes_differ: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def blocks_matched(self) -> int:
        return self.stored_matched + self.removed_matched

    @property
    def mismatches(self) -> int:
        return (
            self.stored_missing
            + self.stored_unexpected
            + self.removed_missing
            + self.removed_unexpected
            + self.hashes_differ
            + self.unresolved_blocks
        )

    def to_dict(self) -> dict[str, Any]:
        names = [name for name in self.__dataclass_fields__ if name != "notes"]
        return {
            **{name: getattr(self, name) for name in names},
            "blocks_matched": self.blocks_matched,
            "mismatches": self.mismatches,
            "notes": self.notes,
        }


def replayed_blocks(
    replayed: Replayed, prompts: Sequence[Sequence[int]], block_size: int, index: BlockIndex
) -> tuple[Counter, Counter]:
    """Stored and removed prefix ids of the prediction's replay."""
    prefix_of: dict[Hashable, int] = {}
    for tokens, keys in zip(prompts, replayed.keys, strict=True):
        prefix_of.update(zip(keys, index.chain(tokens, block_size), strict=False))
    stored: Counter = Counter()
    removed: Counter = Counter()
    for event in replayed.events:
        if event[0] == "BlockStored":
            stored.update(prefix_of[key] for key in event[1] if key in prefix_of)
        elif event[0] == "BlockRemoved" and event[1] in prefix_of:
            removed[prefix_of[event[1]]] += 1
    return stored, removed


def check_kv_events(
    endpoint: str,
    received: Any,
    prompts: Sequence[Sequence[int]],
    block_size: int,
    num_blocks: int | None,
    hash_algo: str | None,
    replayed: Replayed,
) -> KVEventCheck:
    """Compare the events `received` (`endpoint_kv_events.ReceivedEvents`) with those of the
    prediction's pool (`replayed`); `num_blocks`: the server's pool, as it publishes it."""
    index = BlockIndex()
    kinds = Counter(event.get("type", "?") for event in received.events)
    comparable = hash_algo in HASH_ALGOS
    check = KVEventCheck(
        endpoint,
        dict(sorted(kinds.items())),
        received.batches,
        received.missed_batches,
        received.undecodable,
        block_size,
        num_blocks,
        f"token blocks and {hash_algo} hashes" if comparable else "token blocks",
    )
    predicted_stored, predicted_removed = replayed_blocks(replayed, prompts, block_size, index)
    if replayed.pool:
        check.notes.append(f"pcache's pool: {replayed.pool}")
    prompt_ids = set(index.ids.values())
    expected_hash: dict[int, int] = {}
    if comparable:
        settings = HashSettings(hash_algo, block_size)
        for tokens in prompts:
            ids = index.chain(tokens, block_size)
            for prefix, digest in zip(ids, block_hashes(list(tokens), settings), strict=True):
                expected_hash[prefix] = wire_hash(digest)
    else:
        check.notes.append(
            "the server names no hash algorithm pcache implements"
            f" ({hash_algo or 'none published'}): blocks compared by their tokens only"
        )
    stored, removed, held = _server_blocks(received.events, block_size, index, check)
    for prefix, server_hash in held.items():
        if prefix in expected_hash:
            check.hashes_compared += 1
            check.hashes_differ += server_hash != expected_hash[prefix]
    generated = {prefix for prefix in stored if prefix not in prompt_ids}
    check.generated_blocks = sum(stored[prefix] for prefix in generated)
    stored = Counter({p: n for p, n in stored.items() if p not in generated})
    removed = Counter({p: n for p, n in removed.items() if p in prompt_ids})
    check.stored_matched = sum((stored & predicted_stored).values())
    check.stored_missing = sum((predicted_stored - stored).values())
    check.stored_unexpected = sum((stored - predicted_stored).values())
    check.removed_matched = sum((removed & predicted_removed).values())
    check.removed_missing = sum((predicted_removed - removed).values())
    check.removed_unexpected = sum((removed - predicted_removed).values())
    if received.stale:
        check.notes.append(
            f"{received.stale} events the server published before the replay were left out"
        )
    if received.missed_batches:
        check.notes.append(f"{received.missed_batches} event batches were missed (sequence gaps)")
    if check.generated_blocks:
        check.notes.append(
            f"{check.generated_blocks} stored blocks hold generated tokens, which the prediction"
            " (prompts only) does not model; their evictions are not compared either"
        )
    return check


def _server_blocks(
    events: list[dict[str, Any]], block_size: int, index: BlockIndex, check: KVEventCheck
) -> tuple[Counter, Counter, dict[int, int]]:
    """Stored and removed prefix ids from the server's events, and each held block's hash."""
    prefix_of: dict[Any, int] = {}  # server hash -> prefix id, while the server holds it
    copies: Counter = Counter()  # server hash -> copies held
    held: dict[int, Any] = {}
    stored: Counter = Counter()
    removed: Counter = Counter()
    for event in events:
        kind = event.get("type")
        if kind == "AllBlocksCleared":
            prefix_of.clear()
            copies.clear()
            continue
        hashes = event.get("block_hashes") or []
        if kind == "BlockRemoved":
            for server_hash in hashes:
                prefix = prefix_of.get(server_hash)
                if prefix is None:
                    check.unresolved_blocks += 1
                    continue
                removed[prefix] += 1
                copies[server_hash] -= 1
                if copies[server_hash] <= 0:
                    del prefix_of[server_hash], copies[server_hash]
            continue
        if kind != "BlockStored":
            continue
        size = event.get("block_size") or block_size
        parent_hash = event.get("parent_block_hash")
        parent = -1 if parent_hash is None else prefix_of.get(parent_hash)
        tokens = event.get("token_ids") or []
        if parent is None or size != block_size or len(tokens) != size * len(hashes):
            check.unresolved_blocks += len(hashes)
            continue
        for server_hash, prefix in zip(hashes, index.chain(tokens, size, parent), strict=True):
            if prefix_of.setdefault(server_hash, prefix) != prefix:
                check.unresolved_blocks += 1  # one hash for two different prefixes
                continue
            copies[server_hash] += 1
            held[prefix] = server_hash
            stored[prefix] += 1
    return stored, removed, held
