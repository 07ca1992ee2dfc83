"""tiktoken encodings without the network: pcache ships the BPE files and feeds tiktoken's cache.

The vocabularies in `pcache/assets/tiktoken/` are the files OpenAI publishes for tiktoken
(`o200k_base.tiktoken`, `cl100k_base.tiktoken`), gzipped. Their sha256 is checked against the hash
tiktoken itself pins before anything is written. tiktoken looks a file up in `$TIKTOKEN_CACHE_DIR`
under `sha1(url)`; pcache writes the decompressed file there (atomically, in its own cache folder)
and points tiktoken at it only around the first `get_encoding` call, so tiktoken never fetches.
"""

from __future__ import annotations

import binascii
import gzip
import hashlib
import marshal
import os
import tempfile
import threading
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from pcache.errors import TokenizerError

_BASE_URL = "https://openaipublic.blob.core.windows.net/encodings/"

# encoding name -> (vocabulary file, sha256 of the decompressed file as pinned by tiktoken)
VOCABULARIES = {
    "o200k_base": (
        "o200k_base.tiktoken",
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    ),
    "cl100k_base": (
        "cl100k_base.tiktoken",
        "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    ),
}
ENCODING_FILES = {
    "o200k_base": "o200k_base",
    "o200k_harmony": "o200k_base",
    "cl100k_base": "cl100k_base",
}
ENCODINGS = tuple(ENCODING_FILES)
_lock = threading.Lock()


def user_cache_folder() -> Path:
    """pcache's folder in the user cache directory (`$XDG_CACHE_HOME`, else `~/.cache`)."""
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(root) / "pcache"


def cache_dir() -> Path:
    return user_cache_folder() / "tiktoken"


def _materialize(vocabulary: str) -> Path:
    """Write the decompressed vocabulary under tiktoken's cache name; return the folder."""
    file_name, expected = VOCABULARIES[vocabulary]
    url = _BASE_URL + file_name
    folder = cache_dir()
    target = folder / hashlib.sha1(url.encode()).hexdigest()
    if target.exists() and hashlib.sha256(target.read_bytes()).hexdigest() == expected:
        return folder
    asset = resources.files("pcache") / "assets" / "tiktoken" / f"{file_name}.gz"
    data = gzip.decompress(asset.read_bytes())
    if hashlib.sha256(data).hexdigest() != expected:
        raise TokenizerError(f"bundled vocabulary {file_name} is corrupt (sha256 mismatch)")
    folder.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=".tmp-")
    with os.fdopen(handle, "wb") as out:
        out.write(data)
    os.replace(temporary, target)
    return folder


@cache
def get_encoding(name: str) -> Any:
    """tiktoken's `Encoding` for `name`, loaded from pcache's bundled files."""
    if name not in ENCODING_FILES:
        known = ", ".join(ENCODINGS)
        raise TokenizerError(f"unknown tiktoken encoding {name!r} (bundled: {known})")
    import tiktoken
    import tiktoken_ext.openai_public as public

    with _lock:
        vocabulary = ENCODING_FILES[name]
        folder = _materialize(vocabulary)
        ranks = _cached_ranks(vocabulary, folder)
        previous = os.environ.get("TIKTOKEN_CACHE_DIR")
        original_loader = public.load_tiktoken_bpe
        os.environ["TIKTOKEN_CACHE_DIR"] = str(folder)
        public.load_tiktoken_bpe = lambda *args, **kwargs: ranks
        try:
            return tiktoken.get_encoding(name)
        finally:
            public.load_tiktoken_bpe = original_loader
            if previous is None:
                del os.environ["TIKTOKEN_CACHE_DIR"]
            else:
                os.environ["TIKTOKEN_CACHE_DIR"] = previous


def _cached_ranks(vocabulary: str, folder: Path) -> dict[bytes, int]:
    """The vocabulary's BPE ranks, parsed once and kept as a marshal file beside it.

    Parsing 200k base64 lines takes most of tiktoken's load time; the marshal copy loads in a
    tenth of it. Its name carries the verified sha256 of the source file.
    """
    file_name, expected = VOCABULARIES[vocabulary]
    cached = folder / f"{file_name}.{expected[:16]}.ranks.marshal"
    if cached.exists():
        try:
            ranks = marshal.loads(cached.read_bytes())
            if isinstance(ranks, dict) and ranks:
                return ranks
        except (EOFError, ValueError, TypeError):
            pass
    url = _BASE_URL + file_name
    source = folder / hashlib.sha1(url.encode()).hexdigest()
    ranks = {}
    for line in source.read_bytes().splitlines():
        if line:
            token, rank = line.split()
            ranks[binascii.a2b_base64(token)] = int(rank)
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=".tmp-")
    with os.fdopen(handle, "wb") as out:
        out.write(marshal.dumps(ranks))
    os.replace(temporary, cached)
    return ranks


def tiktoken_rs_cache_dir(name: str = "o200k_base") -> Path:
    """A folder laid out for tiktoken-rs users (openai-harmony's `TIKTOKEN_RS_CACHE_DIR`)."""
    return _materialize(ENCODING_FILES[name])
