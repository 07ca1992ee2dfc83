"""Bundled tiktoken vocabularies: loaded without the network, checked against tiktoken's sha256."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pcache.errors import TokenizerError
from pcache.prompt.tokenizers import tiktoken_offline

ROOT = Path(__file__).resolve().parent.parent

# Runs in a fresh interpreter in which any attempt to reach the network raises.
NO_NETWORK_SCRIPT = """
import json, socket, sys
import requests

def refuse(*args, **kwargs):
    raise RuntimeError("network access attempted")

requests.get = requests.Session.request = refuse
socket.socket.connect = socket.create_connection = refuse
from pcache.prompt.tokenizers.tiktoken_offline import get_encoding

out = {}
for name in sys.argv[1:]:
    encoding = get_encoding(name)
    out[name] = [encoding.n_vocab, encoding.encode("hello world <|end|>", allowed_special="all")]
print(json.dumps(out))
"""


def run_offline(cache_home: Path, *names: str) -> subprocess.CompletedProcess[str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR", "TIKTOKEN_RS_CACHE_DIR")
    }
    dead = "http://127.0.0.1:9"
    env.update(
        PYTHONPATH=str(ROOT),
        XDG_CACHE_HOME=str(cache_home),
        TMPDIR=str(cache_home),
        HTTP_PROXY=dead,
        HTTPS_PROXY=dead,
        http_proxy=dead,
        https_proxy=dead,
        NO_PROXY="",
    )
    return subprocess.run(
        [sys.executable, "-c", NO_NETWORK_SCRIPT, *names],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def vocabulary_file(cache_home: Path, encoding: str) -> Path:
    file_name, _ = tiktoken_offline.VOCABULARIES[encoding]
    url = "https://openaipublic.blob.core.windows.net/encodings/" + file_name
    return cache_home / "pcache" / "tiktoken" / hashlib.sha1(url.encode()).hexdigest()


def test_encodings_load_with_the_network_unreachable(tmp_path: Path) -> None:
    result = run_offline(tmp_path, "o200k_harmony", "o200k_base", "cl100k_base")
    assert result.returncode == 0, result.stderr
    loaded = json.loads(result.stdout)
    assert loaded["o200k_harmony"] == [201088, [24912, 2375, 220, 200007]]
    assert loaded["o200k_base"][0] == 200019
    assert loaded["cl100k_base"][0] == 100277
    for encoding in ("o200k_base", "cl100k_base"):
        data = vocabulary_file(tmp_path, encoding).read_bytes()
        assert hashlib.sha256(data).hexdigest() == tiktoken_offline.VOCABULARIES[encoding][1]


def test_a_corrupt_cache_file_is_rejected_and_rewritten(tmp_path: Path) -> None:
    assert run_offline(tmp_path, "o200k_base").returncode == 0
    cached = vocabulary_file(tmp_path, "o200k_base")
    good = cached.read_bytes()
    cached.write_bytes(good[:-100] + b"corrupted\n")
    result = run_offline(tmp_path, "o200k_harmony")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["o200k_harmony"][1] == [24912, 2375, 220, 200007]
    assert cached.read_bytes() == good


def test_a_corrupt_bundled_vocabulary_is_refused(tmp_path: Path, monkeypatch) -> None:
    assets = tmp_path / "package" / "assets" / "tiktoken"
    assets.mkdir(parents=True)
    (assets / "o200k_base.tiktoken.gz").write_bytes(gzip.compress(b"aGVsbG8= 0\n"))
    monkeypatch.setattr(tiktoken_offline.resources, "files", lambda _: tmp_path / "package")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    with pytest.raises(TokenizerError, match="corrupt"):
        tiktoken_offline.tiktoken_rs_cache_dir("o200k_base")
    assert not vocabulary_file(tmp_path / "cache", "o200k_base").exists()


def test_unknown_encoding_is_a_tokenizer_error() -> None:
    with pytest.raises(TokenizerError, match="unknown tiktoken encoding"):
        tiktoken_offline.get_encoding("p50k_base")
