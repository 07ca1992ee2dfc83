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

from pcache.errors import UsageError

DEFAULT_HASH_ALGO = "pcache"
VLLM_HASH_ALGOS = ("sha256", "sha256_cbor", "xxhash", "xxhash_cbor")
HASH_ALGOS = (DEFAULT_HASH_ALGO, *VLLM_HASH_ALGOS)
VLLM_DEFAULT_SEED = "vllm-none-hash"
PCACHE_DOMAIN = b"pcache/block-hash/v1"


@dataclass(frozen=True, slots=True)
class Namespace:
    """What a pcache hash chain is bound to: different namespaces share no hash."""

    renderer: str = ""
    template_digest: str = ""
    block_size: int = 16
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
    block_size: int = 16
    cache_salt: str | None = None
    lora: tuple[str, str] | None = None
    renderer: str = ""
    template_digest: str = ""

    def __post_init__(self) -> None:
        if self.algo not in HASH_ALGOS:
            raise UsageError(
                f"unknown --hash-algo {self.algo!r} (choose from {', '.join(HASH_ALGOS)})"
            )
        if self.block_size < 1:
            raise UsageError(f"--block-size must be at least 1, got {self.block_size}")

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
    tokens = token_ids.tolist() if hasattr(token_ids, "tolist") else list(token_ids)
    num_blocks = len(tokens) // size
    if num_blocks == 0:
        return []
    tokens = tokens[: num_blocks * size]
    if min(tokens) < 0:
        raise UsageError("token ids must be non-negative")
    parent = settings.initial_hash() if parent is None else parent
    if settings.algo == DEFAULT_HASH_ALGO:
        return _pcache_chain(tokens, size, parent)
    if settings.algo.endswith("_cbor"):
        return _cbor_chain(tokens, settings, parent, start_block)
    return _pickle_chain(tokens, settings, parent, start_block)


def _pcache_chain(tokens: list[int], size: int, parent: bytes) -> list[bytes]:
    try:
        packed = array("I", tokens)  # 32-bit unsigned on every platform CPython supports
    except OverflowError:
        raise UsageError("token ids must be below 2**32") from None
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
    from pcache.cache.cbor_stream import cbor_token_stream

    size = settings.block_size
    stream, offsets = cbor_token_stream(tokens)
    bounds = offsets[::size].tolist()
    digest = _digest_function(settings.algo)
    array_head = _cbor_head(4, size)
    parent_head = _cbor_head(2, len(parent))
    no_extra = b"\xf6"
    lora_extra = None
    if settings.lora is not None:
        lora_extra = cbor_encode(vllm_extra_keys(1, None, settings.lora))
    hashes = []
    for block in range(len(bounds) - 1):
        index = start_block + block
        if index == 0 and settings.cache_salt:
            extra = cbor_encode(vllm_extra_keys(0, settings.cache_salt, settings.lora))
        else:
            extra = lora_extra or no_extra
        parent = digest(
            b"\x83"
            + parent_head
            + parent
            + array_head
            + stream[bounds[block] : bounds[block + 1]]
            + extra
        )
        hashes.append(parent)
    return hashes


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
