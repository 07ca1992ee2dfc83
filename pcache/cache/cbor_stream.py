"""Canonical CBOR of many token ids at once (the payload of vLLM's `sha256_cbor` block hashes)."""

from __future__ import annotations

import numpy as np

_CBOR_HEAD = np.array([0, 0, 0x18, 0x19, 0, 0x1A], dtype=np.uint8)
_CBOR_COLUMNS = np.arange(5, dtype=np.uint8)[None, :]


def cbor_token_stream(token_ids: list[int] | np.ndarray) -> tuple[bytes, np.ndarray]:
    """Canonical CBOR of every token id back to back, and each token's byte offset (+ end).

    Each id becomes a 5-byte row (head byte, then the id as 4 big-endian bytes); a mask keeps
    the head and the last 0, 1, 2 or 4 payload bytes: ids < 24 take 1 byte in all, < 256 2,
    < 65536 3, else 5. An id below 24 is its own head byte.
    """
    token_ids = np.asarray(token_ids, dtype=np.int64)
    if token_ids.size and int(token_ids.max()) >= 2**32:
        return _cbor_token_stream_wide(token_ids)
    values = token_ids.astype(np.uint32, copy=False)
    widths = (values >= 24).view(np.uint8) + (values >= 256).view(np.uint8)
    widths += (values >= 65536).view(np.uint8) * np.uint8(2)
    widths += np.uint8(1)
    rows = np.empty((len(values), 5), dtype=np.uint8)
    rows[:, 1:] = values.astype(">u4").view(np.uint8).reshape(-1, 4)
    rows[:, 0] = _CBOR_HEAD[widths]
    small = widths == 1
    rows[small, 0] = values[small]
    keep = (np.uint8(6) - widths)[:, None] <= _CBOR_COLUMNS
    keep[:, 0] = True
    offsets = np.zeros(len(values) + 1, dtype=np.int64)
    np.cumsum(widths, out=offsets[1:])
    return rows[keep].tobytes(), offsets


def _cbor_token_stream_wide(token_ids: np.ndarray) -> tuple[bytes, np.ndarray]:
    import cbor2

    encoded = [cbor2.dumps(int(value)) for value in token_ids.tolist()]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum([len(item) for item in encoded], out=offsets[1:])
    return b"".join(encoded), offsets
