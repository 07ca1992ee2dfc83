"""CLI transcripts (arguments, exit code, stdout, stderr) compared with recorded snapshots.

Update after an intended change with: python -m pytest tests/test_transcripts.py --snapshot-update
"""

from __future__ import annotations

import pytest

from tests.conftest import ROOT

CALIBRATION = "tests/data/calibration_tiny.json"
"""`replay --engine cpu --model tiny --save-calibration` on samples/traces/bailian_tiny.jsonl."""

CASES = {
    "diff-samples-text": ["diff", "samples/a.json", "samples/b.json"],
    "diff-samples-json": ["diff", "samples/a.json", "samples/b.json", "--format", "json"],
    "diff-samples-o200k": ["diff", "samples/a.json", "samples/b.json", "-t", "o200k_base"],
    "hash-sample-cbor": ["hash", "samples/a.json", "--hash-algo", "sha256_cbor", "-b", "64"],
    "diff-bad-json": ["diff", "samples/a.json", "tests/data/broken.json"],
    "replay-calibration-text": [
        "replay",
        "samples/traces/bailian_tiny.jsonl",
        "--calibration",
        CALIBRATION,
    ],
    "replay-calibration-json": [
        "replay",
        "samples/traces/bailian_tiny.jsonl",
        "--calibration",
        CALIBRATION,
        "-f",
        "json",
    ],
    "replay-requests-jobs-json": [
        "replay",
        "samples/traces/requests_tiny.jsonl",
        "--jobs",
        "2",
        "-f",
        "json",
    ],
    "replay-executor-unknown": [
        "replay",
        "samples/traces/requests_tiny.jsonl",
        "--executor",
        "spark",
    ],
}
MACHINE = "Example CPU, 8 CPUs"
"""The machine a transcript says it runs on (a calibration names the machine it measured)."""


@pytest.mark.parametrize("name", sorted(CASES))
def test_transcript(cli, monkeypatch, snapshot, name):
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr("pcache.replayer.calibration_used.this_machine", lambda: MACHINE)
    arguments = CASES[name]
    result = cli(*arguments)
    transcript = (
        f"args: {' '.join(arguments)}\nexit_code: {result.exit_code}\n"
        f"----- stdout -----\n{result.stdout}----- stderr -----\n{result.stderr}"
    )
    assert transcript == snapshot
