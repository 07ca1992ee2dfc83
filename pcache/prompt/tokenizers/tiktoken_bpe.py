"""A byte-level BPE `tokenizer.json` run by tiktoken, where that gives `tokenizers`' ids exactly.

Llama 3.x, Qwen2/2.5/3 and the other models trained with tiktoken ship a `tokenizer.json` that
is a tiktoken encoding written out for `tokenizers`: a byte-level BPE whose vocabulary maps
token bytes (spelled with GPT-2's byte-to-character table) to ids, whose merges list every way
to build each token from two others in the order of the ids, and whose pre-tokenizer is one
split regex. tiktoken encodes such a vocabulary eight times faster. It merges the adjacent pair
whose concatenation has the lowest id and takes a piece that is a token whole, so it equals
`tokenizers`' BPE when:

- the model is a BPE with no dropout, subword prefix, word suffix or byte fallback, every
  token spelled in the byte-level alphabet and every byte a token;
- the merges are in the order of the ids they make and list every split of every token into
  two tokens (tiktoken merges any pair whose concatenation is a token); `ignore_merges` is set,
  or every token merges into itself;
- the normalizer is none or NFC (applied before tiktoken) and no added token is normalized;
- the pre-tokenizer is `Split(regex, Isolated)` then `ByteLevel` without its own regex, or
  `ByteLevel` with GPT-2's, and the regex is one whose alternatives match every character
  (tiktoken drops what its regex does not match; `tokenizers` keeps it).

One difference these checks leave: when two overlapping splits of one token (`A B` and `B C`
spelling the same token) are both mergeable at once, tiktoken merges the left one and
`tokenizers` the one listed first. The property tests over every fixture
(tests/test_tiktoken_bpe.py) have not found a text that reaches that state.

`convert` checks all of this and says why a file does not qualify; the caller then uses
`tokenizers` as before. The result (ranks, pattern, added tokens, or the reason) is cached in
the user cache directory under the file's sha256, so a second run skips the checks; a cache file
that does not load is rebuilt.
"""

from __future__ import annotations

import json
import marshal
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pcache.prompt.tokenizers.tiktoken_offline import user_cache_folder

CACHE_VERSION = 1
"""Bump when the conversion or its checks change: older cache files are then ignored."""

GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
"""ByteLevel's own split regex (`use_regex: true`), as `tokenizers` and tiktoken's r50k spell it."""

COVERING_PATTERNS = frozenset(
    {
        GPT2_PATTERN,
        # Llama 3.x
        r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
        r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
        # Qwen2, Qwen2.5, Qwen3
        r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
        r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
        # Mistral tekken
        r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|"
        r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|"
        r"\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    }
)
"""Split regexes whose alternatives together match every character (letters, numbers,
whitespace, and `[^\\s\\p{L}\\p{N}]` for the rest), so no text falls between matches."""


@dataclass(frozen=True, slots=True)
class Converted:
    """What tiktoken needs to encode like the tokenizer.json (ordinary text only: the added
    tokens are cut out before, by `hf_pieces`)."""

    pattern: str
    ranks: dict[bytes, int]
    added: list[dict[str, Any]]
    """The file's `added_tokens` entries (content, id, special, normalized, ...)."""
    nfc: bool
    """Whether text is NFC-normalized before it is encoded."""


class NotConvertible(Exception):
    """Why a tokenizer.json cannot be encoded exactly by tiktoken."""


def byte_decoder() -> dict[str, int]:
    """GPT-2's byte-level alphabet, reversed: the character that stands for each byte."""
    printable = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("¡"), ord("¬") + 1),
        *range(ord("®"), ord("ÿ") + 1),
    ]
    characters = list(printable)
    extra = 0
    for byte in range(256):
        if byte not in printable:
            printable.append(byte)
            characters.append(256 + extra)
            extra += 1
    return {chr(character): byte for byte, character in zip(printable, characters, strict=True)}


def convert(state: dict[str, Any]) -> Converted:
    """The tiktoken form of a parsed tokenizer.json; `NotConvertible` says why there is none."""
    nfc = _normalizer_is_nfc(state.get("normalizer"))
    pattern = _split_pattern(state.get("pre_tokenizer"))
    added = [dict(token) for token in state.get("added_tokens") or []]
    for token in added:
        if token.get("normalized") and token.get("content"):
            raise NotConvertible(f"added token {token['content']!r} is matched after normalizing")
    model = state.get("model") or {}
    _check_model_options(model)
    vocab: dict[str, int] = model.get("vocab") or {}
    merges = [_merge_pair(merge) for merge in model.get("merges") or []]
    ranks = _ranks(vocab)
    _check_merges(vocab, merges)
    if not model.get("ignore_merges"):
        _check_tokens_merge_whole(vocab, merges)
    return Converted(pattern, ranks, added, nfc)


def _normalizer_is_nfc(normalizer: Any) -> bool:
    if normalizer is None:
        return False
    kind = normalizer.get("type")
    if kind == "NFC":
        return True
    if kind == "Sequence":
        parts = normalizer.get("normalizers") or []
        if not parts:
            return False
        if len(parts) == 1:
            return _normalizer_is_nfc(parts[0])
    raise NotConvertible(f"normalizer {kind} (only none or NFC convert)")


def _split_pattern(pre_tokenizer: Any) -> str:
    if pre_tokenizer is None:
        raise NotConvertible("no pre-tokenizer (not a byte-level BPE)")
    kind = pre_tokenizer.get("type")
    if kind == "ByteLevel":
        _check_byte_level(pre_tokenizer, use_regex=True)
        return GPT2_PATTERN
    parts = pre_tokenizer.get("pretokenizers") if kind == "Sequence" else None
    if not parts or len(parts) != 2:
        raise NotConvertible(f"pre-tokenizer {kind} (only Split + ByteLevel or ByteLevel)")
    split, byte_level = parts
    if split.get("type") != "Split" or byte_level.get("type") != "ByteLevel":
        names = " + ".join(str(part.get("type")) for part in parts)
        raise NotConvertible(f"pre-tokenizer {names} (only Split + ByteLevel or ByteLevel)")
    _check_byte_level(byte_level, use_regex=False)
    pattern = (split.get("pattern") or {}).get("Regex")
    if pattern is None:
        raise NotConvertible("Split on a literal string, not a regex")
    if split.get("behavior") != "Isolated" or split.get("invert"):
        raise NotConvertible(f"Split behavior {split.get('behavior')} (only Isolated)")
    if pattern not in COVERING_PATTERNS:
        raise NotConvertible("split regex not among those known to match every character")
    return pattern


def _check_byte_level(state: dict[str, Any], use_regex: bool) -> None:
    if state.get("add_prefix_space"):
        raise NotConvertible("ByteLevel adds a prefix space")
    if bool(state.get("use_regex", True)) != use_regex:
        raise NotConvertible("ByteLevel's regex setting does not fit its place")


def _check_model_options(model: dict[str, Any]) -> None:
    if model.get("type") != "BPE":
        raise NotConvertible(f"model {model.get('type')} (only BPE)")
    if model.get("dropout"):
        raise NotConvertible("BPE dropout")
    for option in ("continuing_subword_prefix", "end_of_word_suffix"):
        if model.get(option):
            raise NotConvertible(f"BPE {option}")
    if model.get("byte_fallback"):
        raise NotConvertible("BPE byte_fallback")


def _merge_pair(merge: Any) -> tuple[str, str]:
    if isinstance(merge, str):
        left, _, right = merge.partition(" ")
        return left, right
    left, right = merge
    return left, right


def _ranks(vocab: dict[str, int]) -> dict[bytes, int]:
    """Token bytes -> id, every token spelled in the byte-level alphabet."""
    decoder = byte_decoder()
    to_latin1 = str.maketrans({character: chr(byte) for character, byte in decoder.items()})
    alphabet = set(decoder)
    ranks: dict[bytes, int] = {}
    for token, token_id in vocab.items():
        if not token or not alphabet.issuperset(token):
            raise NotConvertible(f"token {token!r} is not spelled in the byte-level alphabet")
        ranks[token.translate(to_latin1).encode("latin-1")] = token_id
    if len(ranks) != len(vocab) or len(set(ranks.values())) != len(ranks):
        raise NotConvertible("two tokens share bytes or an id")
    missing = [byte for byte in range(256) if bytes([byte]) not in ranks]
    if missing:
        raise NotConvertible(f"{len(missing)} of the 256 bytes are not tokens")
    return ranks


def _check_merges(vocab: dict[str, int], merges: list[tuple[str, str]]) -> None:
    """Merges in the order of the ids they make, and every split of a token among them."""
    listed: set[tuple[str, str]] = set()
    last_id = -1
    for pair in merges:
        merged = vocab.get(pair[0] + pair[1])
        if merged is None or pair[0] not in vocab or pair[1] not in vocab:
            raise NotConvertible(f"merge {pair} does not join two tokens into a token")
        if merged < last_id:
            raise NotConvertible("merges are not in the order of the ids they make")
        last_id = merged
        listed.add(pair)
    for token in vocab:
        for cut in range(1, len(token)):
            pair = (token[:cut], token[cut:])
            if pair not in listed and pair[0] in vocab and pair[1] in vocab:
                raise NotConvertible(f"the merges do not list {pair} (tiktoken would merge it)")


def _check_tokens_merge_whole(vocab: dict[str, int], merges: list[tuple[str, str]]) -> None:
    """Without `ignore_merges`, a piece that is a token is still merged pair by pair: every
    token must come out whole, as tiktoken takes it."""
    from tokenizers.models import BPE

    model = BPE(vocab=vocab, merges=merges)
    for token, token_id in vocab.items():
        if len(token) > 1 and [t.id for t in model.tokenize(token)] != [token_id]:
            raise NotConvertible(f"token {token!r} does not merge into itself")


# -- the cache -----------------------------------------------------------------------------------


def cache_folder() -> Path:
    return user_cache_folder() / "bpe"


def cache_path(digest: str) -> Path:
    return cache_folder() / f"{digest}.v{CACHE_VERSION}.marshal"


def converted_or_reason(data: bytes, digest: str) -> Converted | str:
    """The conversion of the tokenizer.json `data` (sha256 `digest`), or why there is none,
    from the cache when it holds a readable entry, else computed and cached."""
    path = cache_path(digest)
    cached = _read_cache(path)
    if cached is not None:
        return cached
    try:
        result: Converted | str = convert(json.loads(data))
    except NotConvertible as reason:
        result = str(reason)
    except (ValueError, TypeError, KeyError, AttributeError) as error:  # an odd file
        result = f"unexpected tokenizer.json layout ({type(error).__name__})"
    _write_cache(path, result)
    return result


def _read_cache(path: Path) -> Converted | str | None:
    try:
        value = marshal.loads(path.read_bytes())
    except (OSError, EOFError, ValueError, TypeError):
        return None
    if not isinstance(value, dict) or value.get("version") != CACHE_VERSION:
        return None
    if isinstance(value.get("reason"), str):
        return value["reason"]
    try:
        converted = Converted(value["pattern"], value["ranks"], value["added"], value["nfc"])
    except KeyError:
        return None
    valid = (
        isinstance(converted.pattern, str)
        and isinstance(converted.ranks, dict)
        and len(converted.ranks) >= 256
        and isinstance(converted.added, list)
    )
    return converted if valid else None


def _write_cache(path: Path, result: Converted | str) -> None:
    if isinstance(result, str):
        value: dict[str, Any] = {"version": CACHE_VERSION, "reason": result}
    else:
        value = {
            "version": CACHE_VERSION,
            "pattern": result.pattern,
            "ranks": result.ranks,
            "added": result.added,
            "nfc": result.nfc,
        }
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        with os.fdopen(handle, "wb") as out:
            out.write(marshal.dumps(value))
        os.replace(temporary, path)
    except OSError:
        pass  # a read-only cache: convert again next time


@dataclass(frozen=True, slots=True)
class FastBPE:
    """A tokenizer.json's tiktoken encoding and what it was made from."""

    encoding: Any
    converted: Converted


def fast_path_allowed() -> bool:
    """False when `PCACHE_TOKENIZERS=1` asks for `tokenizers` everywhere (comparisons)."""
    return os.environ.get("PCACHE_TOKENIZERS", "").strip() not in ("1", "true", "yes")


def fast_bpe(data: bytes, digest: str, label: str) -> FastBPE | str:
    """tiktoken over the tokenizer.json `data` (sha256 `digest`), or why not."""
    result = converted_or_reason(data, digest)
    if isinstance(result, str):
        return result
    return FastBPE(encoding_of(result, f"hf:{label}@{digest[:12]}"), result)


def encoding_of(converted: Converted, name: str) -> Any:
    """tiktoken's `Encoding` over the converted ranks (ordinary text; no special tokens)."""
    import tiktoken

    return tiktoken.Encoding(
        name=name, pat_str=converted.pattern, mergeable_ranks=converted.ranks, special_tokens={}
    )
