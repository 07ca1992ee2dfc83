"""vLLM's KV event stream on the wire (vLLM 0.32, `vllm/distributed/kv_events.py`).

A ZMQ PUB socket sends one multipart message per batch: the topic, the batch's sequence
number (8 bytes, big-endian) and a msgpack payload. The payload is msgspec's encoding of a
`KVEventBatch`: an array `[ts, events, data_parallel_rank]`. Each event is a map tagged with
its class name under `"type"` (msgspec `tag=True`), fields in declaration order, fields that
equal their default left out (`omit_defaults`):

- `BlockStored`: block_hashes, parent_block_hash, token_ids, block_size, lora_id, medium,
  lora_name, extra_keys (one entry per block), group_idx;
- `BlockRemoved`: block_hashes, medium, group_idx;
- `AllBlocksCleared`: no field.

A block hash is sent as vLLM sends it by default (`VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=1`):
the low 64 bits of the digest read big-endian, an unsigned integer.
tests/fixtures/kv_events holds a batch encoded by vLLM itself; the tests compare bytes.
"""

from __future__ import annotations

import time
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pcache.errors import UsageError

MEDIUM_GPU = "GPU"
INT_HASH_MASK = (1 << 64) - 1
EXTRA_HINT = "pip install 'pcache[events]'"


def wire_hash(block_hash: Hashable) -> int:
    """A block hash as vLLM puts it on the wire: the digest's low 64 bits."""
    if isinstance(block_hash, bytes):
        return int.from_bytes(block_hash, "big") & INT_HASH_MASK
    assert isinstance(block_hash, int), f"a block hash is bytes or int, not {block_hash!r}"
    return block_hash & INT_HASH_MASK


@dataclass(frozen=True, slots=True)
class StoredBlocks:
    """One `BlockStored`: consecutive blocks of one request, the first one's parent given."""

    block_hashes: tuple[int, ...]
    parent_block_hash: int | None
    token_ids: tuple[int, ...]
    block_size: int

    def encode(self) -> dict[str, Any]:
        return {
            "type": "BlockStored",
            "block_hashes": list(self.block_hashes),
            "parent_block_hash": self.parent_block_hash,
            "token_ids": list(self.token_ids),
            "block_size": self.block_size,
            "lora_id": None,
            "medium": MEDIUM_GPU,
            "lora_name": None,
            "extra_keys": [None] * len(self.block_hashes),
            "group_idx": 0,
        }


def pool_events(events: Iterable[tuple], block_size: int) -> list[dict[str, Any]]:
    """The block pool's queued events (`BlockPool.take_events`) as vLLM's event maps."""
    encoded: list[dict[str, Any]] = []
    for event in events:
        kind = event[0]
        if kind == "BlockStored":
            _, keys, _num_tokens, parent, token_ids = event
            if not keys:
                continue
            stored = StoredBlocks(
                tuple(wire_hash(key) for key in keys),
                None if parent is None else wire_hash(parent),
                tuple(token_ids),
                block_size,
            )
            encoded.append(stored.encode())
        elif kind == "BlockRemoved":
            encoded.append(
                {
                    "type": "BlockRemoved",
                    "block_hashes": [wire_hash(event[1])],
                    "medium": MEDIUM_GPU,
                    "group_idx": 0,
                }
            )
        else:
            assert kind == "AllBlocksCleared", kind
            encoded.append({"type": "AllBlocksCleared"})
    return encoded


def msgpack_module():
    """msgpack, or a usage error that says how to install it."""
    try:
        import msgpack
    except ImportError:
        raise UsageError(f"KV events need msgpack and pyzmq: {EXTRA_HINT}") from None
    return msgpack


def zmq_module():
    """pyzmq, or a usage error that says how to install it."""
    try:
        import zmq
    except ImportError:
        raise UsageError(f"KV events need pyzmq and msgpack: {EXTRA_HINT}") from None
    return zmq


def encode_batch(
    events: Sequence[dict[str, Any]], ts: float | None = None, data_parallel_rank: int | None = None
) -> bytes:
    """A `KVEventBatch` payload, byte for byte as msgspec encodes it."""
    batch = [time.time() if ts is None else ts, list(events), data_parallel_rank]
    return msgpack_module().packb(batch, use_bin_type=True)


def sequence_bytes(sequence: int) -> bytes:
    return sequence.to_bytes(8, "big")
