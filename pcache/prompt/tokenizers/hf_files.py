"""Finding a Hugging Face model's tokenizer files: a local directory, or a hub id.

An existing path is always a directory, never a hub id. A hub id is looked up in the local
Hugging Face cache first; only when it is missing there, and the hub is allowed
(`HF_HUB_OFFLINE` unset) and answers a short connection probe, are the tokenizer files (never
weights) downloaded into that cache. Offline, a missing model fails at once.
"""

from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path

from pcache.errors import TokenizerError

TOKENIZER_FILE = "tokenizer.json"
CONFIG_FILE = "tokenizer_config.json"
TEMPLATE_FILE = "chat_template.jinja"
SPECIAL_TOKENS_FILE = "special_tokens_map.json"
OPTIONAL_FILES = (CONFIG_FILE, TEMPLATE_FILE, SPECIAL_TOKENS_FILE)

PROBE_TIMEOUT_S = 3.0
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")


@dataclass(frozen=True, slots=True)
class ModelFiles:
    """Where one model's tokenizer files are; `label` names the model in messages and hashes."""

    label: str
    tokenizer: Path
    config: Path | None = None
    template: Path | None = None
    special_tokens: Path | None = None


def locate_model_files(name_or_path: str) -> ModelFiles:
    """A local directory's files, or a hub id's files from the cache (downloaded if allowed)."""
    path = Path(name_or_path).expanduser()
    try:
        exists = path.exists()
    except OSError as error:  # a name too long to be a path, say
        shown = name_or_path[:80] + ("..." if len(name_or_path) > 80 else "")
        raise TokenizerError(f"{shown}: not a tokenizer ({error.strerror or error})") from None
    if exists:
        return _local_files(path, name_or_path)
    if not _HUB_ID.match(name_or_path) or name_or_path.startswith((".", "~")):
        raise TokenizerError(
            f"{name_or_path}: no such directory, not a Hugging Face model id, and not a built-in"
            f" tokenizer ({built_in_names()})"
        )
    return _hub_files(name_or_path)


def _local_files(path: Path, label: str) -> ModelFiles:
    if not path.is_dir():
        raise TokenizerError(f"{label}: a tokenizer must be a directory holding {TOKENIZER_FILE}")
    tokenizer = path / TOKENIZER_FILE
    if not tokenizer.exists():
        raise TokenizerError(f"{label}: no {TOKENIZER_FILE} in this directory")
    optional = [path / name if (path / name).exists() else None for name in OPTIONAL_FILES]
    return ModelFiles(path.resolve().name or label, tokenizer, *optional)


def built_in_names() -> str:
    from pcache.prompt.tokenizers.tiktoken_offline import ENCODINGS

    return ", ".join(("gpt-oss", *ENCODINGS))


def hub_offline() -> bool:
    if os.environ.get("HF_HUB_OFFLINE", "").strip().upper() in ("1", "ON", "YES", "TRUE"):
        return True
    from huggingface_hub import constants

    return bool(constants.HF_HUB_OFFLINE)


def _hub_files(repo_id: str) -> ModelFiles:
    from huggingface_hub import try_to_load_from_cache

    def cached(filename: str) -> Path | None:
        found = try_to_load_from_cache(repo_id, filename)
        return Path(found) if isinstance(found, str) else None

    tokenizer = cached(TOKENIZER_FILE)
    if tokenizer is not None:
        return ModelFiles(repo_id, tokenizer, *(cached(name) for name in OPTIONAL_FILES))
    if hub_offline():
        raise TokenizerError(
            f"{repo_id}: not a built-in tokenizer ({built_in_names()}), no such directory, and"
            " not in the local Hugging Face cache while HF_HUB_OFFLINE is set (download its"
            " tokenizer files first)"
        )
    _probe_hub(repo_id)
    return _download(repo_id)


def _probe_hub(repo_id: str) -> None:
    """Fail in seconds, not after minutes of retries, when the hub cannot be reached."""
    import socket
    from urllib.parse import urlparse

    from huggingface_hub import constants

    endpoint = urlparse(constants.ENDPOINT)
    host = endpoint.hostname or "huggingface.co"
    port = endpoint.port or (443 if endpoint.scheme == "https" else 80)
    failure: list[str] = ["timed out"]

    def connect() -> None:
        try:
            socket.create_connection((host, port), timeout=PROBE_TIMEOUT_S).close()
            failure.clear()
        except OSError as error:
            failure[0] = error.strerror or str(error)

    probe = threading.Thread(target=connect, daemon=True)
    probe.start()
    probe.join(PROBE_TIMEOUT_S + 0.5)
    if failure:
        raise TokenizerError(
            f"{repo_id}: not a built-in tokenizer ({built_in_names()}), not in the local Hugging"
            f" Face cache, and {host} cannot be reached ({failure[0]})"
        )


def _download(repo_id: str) -> ModelFiles:
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import (
        EntryNotFoundError,
        GatedRepoError,
        HfHubHTTPError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
    )

    def fetch(filename: str, required: bool) -> Path | None:
        try:
            return Path(hf_hub_download(repo_id, filename, etag_timeout=PROBE_TIMEOUT_S))
        except GatedRepoError:
            raise TokenizerError(f"{repo_id}: gated on the Hugging Face hub (log in)") from None
        except LocalEntryNotFoundError:
            raise TokenizerError(f"{repo_id}: cannot download {filename} (no connection)") from None
        except RepositoryNotFoundError:
            raise TokenizerError(f"{repo_id}: no such model on the Hugging Face hub") from None
        except EntryNotFoundError:
            if required:
                raise TokenizerError(f"{repo_id}: the model has no {filename}") from None
            return None
        except (HfHubHTTPError, OSError) as error:
            reason = str(error).splitlines()[0] if str(error) else type(error).__name__
            raise TokenizerError(f"{repo_id}: cannot download {filename}: {reason}") from None

    tokenizer = fetch(TOKENIZER_FILE, required=True)
    assert tokenizer is not None
    return ModelFiles(repo_id, tokenizer, *(fetch(name, required=False) for name in OPTIONAL_FILES))
