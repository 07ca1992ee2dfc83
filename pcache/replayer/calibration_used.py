"""`CalibrationUsed`: which calibration file a simulation predicted its TTFTs with.

A report whose TTFTs come from `replay --simulate --calibration F` names F, its SHA-256 (the
file, byte for byte), and what F says of its own measurement: the engine's model, dtype,
device and backend, the machine, the date, the samples and the fit's error. Where F was
measured with another model than the one the run sizes its cache for, or on another machine
than the one the run is on, `notes` says so: the predicted TTFTs are then F's model's on F's
machine, which the reader may or may not have meant.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field


def this_machine() -> str:
    """This machine as a calibration names a CPU one: `<CPU model>, <N> CPUs`."""
    from pcache.process.machine import cpu_name

    return f"{cpu_name()}, {os.cpu_count()} CPUs"


@dataclass(frozen=True, slots=True)
class CalibrationUsed:
    """A calibration file's identity and provenance, as a report shows it."""

    path: str
    sha256: str
    engine_model: str
    dtype: str
    device: str
    backend: str
    machine: str
    date: str
    samples: int
    probes: int
    rank: int
    rms_error_ms: float
    notes: list[str] = field(default_factory=list)
    """Where the calibration's model or machine differ from the run's."""


def mismatch_notes(engine_model: str, machine: str, run_model: str, run_machine: str) -> list[str]:
    """What differs between where a calibration was measured and the run that uses it."""
    from pcache.models import canonical_name

    def name(model: str) -> str:  # a preset by its canonical name, a folder as written
        return canonical_name(model) or model

    notes = []
    if engine_model and name(engine_model) != name(run_model):
        notes.append(
            f"calibrated with model {engine_model}; this run sizes the cache for {run_model}:"
            f" the TTFTs predicted are {engine_model}'s"
        )
    if machine and not machine.startswith(run_machine):
        notes.append(
            f"calibrated on {machine}; this run is on {run_machine}:"
            " the TTFTs predicted are that machine's"
        )
    return notes
