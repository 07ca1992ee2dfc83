"""A replay predicted with a calibration file names the file, where it was measured, and what
differs from the run (text and JSON are views of `ReplayReport.calibration`)."""

from __future__ import annotations

import hashlib

import orjson
import pytest

import pcache
from pcache.replayer.calibration import load_calibration
from tests.conftest import ROOT, SAMPLES

TRACE = SAMPLES / "traces" / "bailian_tiny.jsonl"
CALIBRATION = ROOT / "tests" / "data" / "calibration_tiny.json"
MEASURED_ON = "AMD EPYC, 2 CPUs"
"""The start of the fixture's `machine`: a run on this machine is on the calibration's."""


@pytest.fixture
def on_machine(monkeypatch):
    def choose(name: str) -> None:
        monkeypatch.setattr("pcache.replayer.calibration_used.this_machine", lambda: name)

    return choose


def test_the_json_names_the_file_and_its_measurement(cli, on_machine):
    on_machine(MEASURED_ON)
    result = cli("replay", TRACE, "--calibration", CALIBRATION, "--model", "tiny", "-f", "json")
    assert result.exit_code == 0, result.output
    used = orjson.loads(result.stdout)["calibration"]
    fit = load_calibration(str(CALIBRATION))
    assert used["sha256"] == hashlib.sha256(CALIBRATION.read_bytes()).hexdigest()
    assert used["path"] == str(CALIBRATION)
    for key in ("engine_model", "dtype", "device", "backend", "machine", "date", "samples"):
        assert used[key] == getattr(fit, key)
    assert used["notes"] == []  # same model, same machine


def test_a_calibration_of_another_model_and_machine_is_noted(cli, on_machine):
    on_machine("Some Other CPU, 64 CPUs")
    result = cli("replay", TRACE, "--calibration", CALIBRATION, "--model", "llama3-8b")
    assert result.exit_code == 0, result.output
    text = " ".join(result.stdout.split())
    assert "calibrated with model tiny; this run sizes the cache for llama3-8b" in text
    assert "this run is on Some Other CPU, 64 CPUs" in text
    assert "float32 on cpu (torch)" in text and "2026-12-01" in text


def test_the_api_report_carries_the_calibration(on_machine):
    on_machine(MEASURED_ON)
    report = pcache.replay(TRACE, calibration=CALIBRATION, model="tiny").reports[0]
    assert report.calibration is not None and report.calibration.engine_model == "tiny"
    assert report.ttft_model == load_calibration(str(CALIBRATION)).model
    assert pcache.replay(TRACE).reports[0].calibration is None
    assert pcache.replay(TRACE).to_dict()["calibration"] is None


def test_a_fleet_replay_carries_the_calibration_and_the_observed_tokens(cli, on_machine):
    """`--replicas` reports what the one-pool replay reports about its inputs."""
    on_machine(MEASURED_ON)
    requests = ROOT / "samples" / "traces" / "requests_tiny.jsonl"
    reports = []
    for fleet in ((), ("--replicas", "2")):
        args = ("--calibration", CALIBRATION, "--model", "tiny", "-t", "o200k_base", *fleet)
        result = cli("replay", requests, *args, "-f", "json")
        assert result.exit_code == 0, result.output
        reports.append(orjson.loads(result.stdout))
    single, fleet = reports
    assert fleet["num_replicas"] == len(fleet["replicas"]) == 2
    assert fleet["calibration"] == single["calibration"] is not None
    assert fleet["observed_cached_tokens"] == single["observed_cached_tokens"] == 128
