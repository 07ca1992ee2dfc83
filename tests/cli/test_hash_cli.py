"""`pcache hash` text output: one line per block, file names printed as they are."""

from __future__ import annotations

import json
import shutil

from tests.conftest import SAMPLES, run_pcache


def test_text_rows_keep_each_digest_on_its_block_line_at_any_width(tmp_path, monkeypatch):
    request = tmp_path / "[bold]a.json"  # rich markup in a file name is printed, not applied
    shutil.copy(SAMPLES / "a.json", request)
    monkeypatch.setenv("COLUMNS", "60")
    text = run_pcache("hash", request, "-b", "64")
    assert text.returncode == 0, text.stderr
    as_json = run_pcache("hash", request, "-b", "64", "--format", "json")
    digests = json.loads(as_json.stdout)["block_hashes"]
    lines = text.stdout.decode().splitlines()
    assert lines[0].startswith(f"{request}: 1325 tokens, 20 full blocks of 64")
    assert len(lines) == 1 + len(digests)
    for index, (line, digest) in enumerate(zip(lines[1:], digests, strict=True)):
        assert line.split() == [
            "block",
            str(index),
            "tokens",
            f"{index * 64}-{index * 64 + 63}",
            digest,
        ]
