"""Chained block hashes: vLLM-compatible families and pcache's own namespaced default.

Block i covers tokens [i*B, (i+1)*B); only full blocks get a hash. Block i's hash is
H(parent, token ids of block i, extra keys), where block 0's parent is an initial hash.

vLLM families (byte-compatible with vLLM 0.33 `hash_block_tokens`):
- `sha256`: sha256 of `pickle.dumps((parent, tuple(tokens), extra_keys), protocol=5)`;
- `sha256_cbor`: sha256 of canonical CBOR of the same 3-tuple;
- `xxhash`, `xxhash_cbor`: xxh3-128 of the same bytes (needs the optional `xxhash` package).
The initial hash is `H(seed)` with seed = `$PYTHONHASHSEED` when set, else `"vllm-none-hash"`
(for xxhash without `PYTHONHASHSEED`, vLLM draws a random seed per process, and so does pcache).
Extra keys are tagged as in 0.33: `("cache_salt", salt)` on block 0 only and
`("lora", name, path)` on every block.

pcache's own family (`pcache`, the default): sha256 over a typed, length-prefixed encoding, so
no two different inputs share bytes, and an initial hash that binds a namespace (renderer
identity, template digest, block size, cache salt, LoRA). Two tenants, models or templates can
never share a hash.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import struct
import sys
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

from pcache.defaults import DEFAULT_BLOCK_SIZE, DEFAULT_HASH_ALGO
from pcache.errors import OptionError, UsageError

VLLM_HASH_ALGOS = ("sha256", "sha256_cbor", "xxhash", "xxhash_cbor")
HASH_ALGOS = (DEFAULT_HASH_ALGO, *VLLM_HASH_ALGOS)
VLLM_DEFAULT_SEED = "vllm-none-hash"
PCACHE_DOMAIN = b"pcache/block-hash/v1"


@dataclass(frozen=True, slots=True)
class Namespace:
    """What a pcache hash chain is bound to: different namespaces share no hash."""

    renderer: str = ""
    template_digest: str = ""
    block_size: int = DEFAULT_BLOCK_SIZE
    cache_salt: str | None = None
    lora: str | None = None

    def encode(self) -> bytes:
        fields = (
            ("renderer", self.renderer),
            ("template", self.template_digest),
            ("block_size", str(self.block_size)),
            ("cache_salt", "" if self.cache_salt is None else "=" + self.cache_salt),
            ("lora", "" if self.lora is None else "=" + self.lora),
        )
        return b"".join(_field(name.encode()) + _field(value.encode()) for name, value in fields)


def _field(data: bytes) -> bytes:
    return struct.pack("<Q", len(data)) + data


# -- primitive serializations ---------------------------------------------------------------


def cbor_encode(value: object) -> bytes:
    import cbor2

    return cbor2.dumps(value, canonical=True)


def _digest_function(algo: str):
    if algo.startswith("xxhash"):
        try:
            import xxhash
        except ImportError:
            raise UsageError(
                f"--hash-algo {algo} needs the `xxhash` package (pip install xxhash)"
            ) from None
        return xxhash.xxh3_128_digest
    return lambda data: hashlib.sha256(data).digest()


def serialize(algo: str, value: object) -> bytes:
    """The bytes vLLM hashes for `value` under `algo`."""
    if algo.endswith("_cbor"):
        return cbor_encode(value)
    return pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)


def vllm_hash(algo: str, value: object) -> bytes:
    return _digest_function(algo)(serialize(algo, value))


def vllm_none_hash_seed(algo: str) -> str:
    """The seed vLLM 0.33 hashes into its initial parent hash (`NONE_HASH`)."""
    seed = os.environ.get("PYTHONHASHSEED")
    if seed is not None:
        return seed
    if algo.startswith("xxhash"):
        return _process_random_seed()
    return VLLM_DEFAULT_SEED


@cache
def _process_random_seed() -> str:
    """vLLM draws one random seed per engine process for xxhash without PYTHONHASHSEED."""
    return os.urandom(32).hex()


def vllm_none_hash(algo: str) -> bytes:
    return vllm_hash(algo, vllm_none_hash_seed(algo))


def vllm_extra_keys(block_index: int, cache_salt: str | None, lora: tuple[str, str] | None):
    """vLLM 0.33 tagged extra keys for one block, or None when there are none."""
    keys: list[tuple[str, ...]] = []
    if lora is not None:
        keys.append(("lora", lora[0], lora[1]))
    if block_index == 0 and cache_salt:
        keys.append(("cache_salt", cache_salt))
    return tuple(keys) if keys else None


def pcache_initial_hash(namespace: Namespace) -> bytes:
    return hashlib.sha256(_field(PCACHE_DOMAIN) + namespace.encode()).digest()


def _cbor_head(major: int, length: int) -> bytes:
    if length < 24:
        return bytes([major << 5 | length])
    if length < 256:
        return bytes([major << 5 | 24, length])
    if length < 65536:
        return bytes([major << 5 | 25]) + length.to_bytes(2, "big")
    return bytes([major << 5 | 26]) + length.to_bytes(4, "big")


# -- the chain ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HashSettings:
    """Everything that decides a chain of block hashes besides the tokens."""

    algo: str = DEFAULT_HASH_ALGO
    block_size: int = DEFAULT_BLOCK_SIZE
    cache_salt: str | None = None
    lora: tuple[str, str] | None = None
    renderer: str = ""
    template_digest: str = ""

    def __post_init__(self) -> None:
        if self.algo not in HASH_ALGOS:
            choices = ", ".join(HASH_ALGOS)
            reason = f"{self.algo!r} (choose from {choices})"
            raise OptionError("hash_algo", reason, lead="unknown ")
        if self.block_size < 1:
            raise OptionError("block_size", f"must be at least 1, got {self.block_size}")

    def namespace(self) -> Namespace:
        lora = None if self.lora is None else f"{self.lora[0]}@{self.lora[1]}"
        return Namespace(
            self.renderer, self.template_digest, self.block_size, self.cache_salt, lora
        )

    def initial_hash(self) -> bytes:
        if self.algo == DEFAULT_HASH_ALGO:
            return pcache_initial_hash(self.namespace())
        return vllm_none_hash(self.algo)


def block_hashes(
    token_ids: Sequence[int],
    settings: HashSettings,
    *,
    parent: bytes | None = None,
    start_block: int = 0,
) -> list[bytes]:
    """Chained hashes of the full blocks of `token_ids`.

    `parent` and `start_block` continue an existing chain: the tokens are then the ones after
    `start_block` full blocks, and `parent` is the hash of the block before them.
    """
    size = settings.block_size
    if isinstance(token_ids, list):
        tokens = token_ids
    else:
        tokens = token_ids.tolist() if hasattr(token_ids, "tolist") else list(token_ids)
    num_blocks = len(tokens) // size
    if num_blocks == 0:
        return []
    if len(tokens) != num_blocks * size:
        tokens = tokens[: num_blocks * size]
    parent = settings.initial_hash() if parent is None else parent
    if settings.algo == DEFAULT_HASH_ALGO:
        return _pcache_chain(tokens, size, parent)
    if settings.algo.endswith("_cbor"):
        return _cbor_chain(tokens, settings, parent, start_block)
    if min(tokens) < 0:
        raise UsageError("token ids must be non-negative")
    return _pickle_chain(tokens, settings, parent, start_block)


def _pcache_chain(tokens: list[int], size: int, parent: bytes) -> list[bytes]:
    try:
        packed = array("I", tokens)  # 32-bit unsigned on every platform CPython supports
    except OverflowError:
        raise UsageError("token ids must be non-negative and below 2**32") from None
    if sys.byteorder != "little":
        packed.byteswap()
    payload = packed.tobytes()
    stride = 4 * size
    header = struct.pack("<Q", size)
    sha256 = hashlib.sha256
    hashes = []
    for offset in range(0, len(payload), stride):
        parent = sha256(parent + header + payload[offset : offset + stride]).digest()
        hashes.append(parent)
    return hashes


def _cbor_chain(
    tokens: list[int], settings: HashSettings, parent: bytes, start_block: int
) -> list[bytes]:
    """vLLM's CBOR chain. The canonical CBOR of a block's 3-tuple is
    `83 | bytes-head parent | array-head token ints | extra keys`; the token ints of all blocks
    come from one C-level `cbor2.dumps(tokens)`, framed per block with numpy, so the loop that
    must run in order only concatenates the parent and hashes."""
    size = settings.block_size
    digest = _digest_function(settings.algo)
    prefix = b"\x83" + _cbor_head(2, len(parent))
    hashes: list[bytes] = []
    if start_block == 0 and settings.cache_salt:  # block 0 alone carries the salt
        extra = cbor_encode(vllm_extra_keys(0, settings.cache_salt, settings.lora))
        parent = digest(prefix + parent + cbor_encode(tuple(tokens[:size])) + extra)
        hashes.append(parent)
        tokens = tokens[size:]
    if not tokens:
        return hashes
    extra = cbor_encode(vllm_extra_keys(1, None, settings.lora))  # b"\xf6" (None) without LoRA
    framed, starts, ends = _framed_cbor_blocks(tokens, size, _cbor_head(4, size), extra)
    for start, end in zip(starts, ends, strict=True):
        parent = digest(prefix + parent + framed[start:end])
        hashes.append(parent)
    return hashes


def _framed_cbor_blocks(
    tokens: list[int], size: int, array_head: bytes, extra: bytes
) -> tuple[bytes, list[int], list[int]]:
    """`array_head + CBOR ints + extra` of every block, back to back, and each block's span."""
    import cbor2
    import numpy as np

    num_blocks = len(tokens) // size
    try:
        values = np.frombuffer(array("I", tokens), dtype=np.uint32)
    except OverflowError:  # ids of 2**32 and above: encode block by block
        if min(tokens) < 0:
            raise UsageError("token ids must be non-negative") from None
        chunks = [
            cbor2.dumps(tuple(tokens[i * size : (i + 1) * size])) + extra for i in range(num_blocks)
        ]
        ends = np.cumsum([len(chunk) for chunk in chunks]).tolist()
        return b"".join(chunks), [0, *ends[:-1]], ends
    widths = (values >= 24).view(np.uint8) + (values >= 256).view(np.uint8)
    widths += (values >= 65536).view(np.uint8) * np.uint8(2)  # 1, 2, 3 or 5 bytes a token
    block_bytes = widths.reshape(num_blocks, size).sum(axis=1, dtype=np.int64) + size
    token_ends = np.cumsum(block_bytes)
    token_starts = token_ends - block_bytes
    encoded = cbor2.dumps(tokens)
    body = np.frombuffer(encoded, dtype=np.uint8, offset=len(encoded) - int(token_ends[-1]))
    head, tail = np.frombuffer(array_head, np.uint8), np.frombuffer(extra, np.uint8)
    # per block, in order: the array head before its ints, the extra keys after them
    where = np.concatenate(
        [
            np.repeat(token_starts[:, None], len(head), axis=1),
            np.repeat(token_ends[:, None], len(tail), axis=1),
        ],
        axis=1,
    ).ravel()
    what = np.tile(np.concatenate([head, tail]), num_blocks)
    framed = np.insert(body, where, what).tobytes()
    shift = np.arange(num_blocks, dtype=np.int64) * (len(head) + len(tail))
    return (
        framed,
        (token_starts + shift).tolist(),
        (token_ends + shift + len(head) + len(tail)).tolist(),
    )


def _pickle_chain(
    tokens: list[int], settings: HashSettings, parent: bytes, start_block: int
) -> list[bytes]:
    size = settings.block_size
    digest = _digest_function(settings.algo)
    dumps, protocol = pickle.dumps, pickle.HIGHEST_PROTOCOL
    hashes = []
    for block in range(len(tokens) // size):
        extra = vllm_extra_keys(start_block + block, settings.cache_salt, settings.lora)
        chunk = tuple(tokens[block * size : (block + 1) * size])
        parent = digest(dumps((parent, chunk, extra), protocol=protocol))
        hashes.append(parent)
    return hashes
