"""Fitting the TTFT model to measured TTFTs, and the calibration file that keeps the fit.

The fit is a non-negative least-squares fit of TTFT = overhead + a x uncached tokens +
b x query-key pairs (`pcache.replayer.ttft`) over measured (prompt tokens, cached tokens, TTFT)
samples: every subset of the three terms is solved by least squares and the best fit with
no negative coefficient is kept (a negative cost per token would predict faster prefills
for longer prompts). The residuals are relative (each divided by its measured TTFT), so
short prompts, which pin the per-token cost, weigh as much as long ones, whose absolute
noise is larger. Prompts of one length cannot separate the overhead from the per-token
cost; the fit then says so in `rank`.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from pcache.errors import InputError
from pcache.replayer.ttft import TtftModel, attention_pairs

if TYPE_CHECKING:
    from pcache.replayer.calibration_used import CalibrationUsed

FORMAT = "pcache-ttft-calibration/1"


@dataclass(frozen=True, slots=True)
class Calibration:
    """A fitted TTFT model and where it was measured."""

    model: TtftModel
    samples: int
    rank: int
    """Independent terms the samples determined (3: overhead, per token and per pair)."""
    rms_error_ms: float
    probes: int = 0
    """How many of the samples were length probes rather than requests of the trace."""
    engine_model: str = ""
    dtype: str = ""
    device: str = ""
    backend: str = ""
    machine: str = ""
    date: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, **asdict(self)}


def _features(num_tokens: int, num_cached: int) -> tuple[float, float, float]:
    return 1.0, float(num_tokens - num_cached), float(attention_pairs(num_tokens, num_cached))


def fit_ttft_model(samples: list[tuple[int, int, float]]) -> Calibration:
    """Fit overhead, per uncached token and per pair (ms) to (tokens, cached, TTFT ms)."""
    assert samples, "a fit needs at least one measurement"
    measured = np.array([ttft for _, _, ttft in samples])
    weights = 1.0 / np.maximum(measured, 1e-9)
    design = np.array([_features(tokens, cached) for tokens, cached, _ in samples])
    design = design * weights[:, None]
    target = measured * weights  # ones: relative residuals
    scale = np.abs(design).max(axis=0)
    scale[scale == 0] = 1.0
    scaled = design / scale
    best: tuple[float, np.ndarray] | None = None
    for size in (3, 2, 1):
        for columns in itertools.combinations(range(3), size):
            solution, *_ = np.linalg.lstsq(scaled[:, columns], target, rcond=None)
            if (solution < 0).any():
                continue
            coefficients = np.zeros(3)
            coefficients[list(columns)] = solution
            residual = float(np.sum((scaled @ coefficients - target) ** 2))
            if best is None or residual < best[0] - 1e-12 * max(residual, 1.0):
                best = (residual, coefficients)
    assert best is not None  # the overhead alone always fits with a non-negative mean
    coefficients = best[1] / scale
    model = TtftModel(*(float(value) for value in coefficients))
    errors = [model.predict(tokens, cached) - ttft for tokens, cached, ttft in samples]
    return Calibration(
        model=model,
        samples=len(samples),
        rank=int(np.linalg.matrix_rank(scaled)),
        rms_error_ms=round(math.sqrt(math.fsum(e * e for e in errors) / len(samples)), 3),
    )


def save_calibration(path: str, calibration: Calibration) -> None:
    import orjson

    from pcache.files import write_atomically

    data = orjson.dumps(calibration.to_dict(), option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS)
    write_atomically(path, [data + b"\n"])


def _number(
    container: dict, key: str, source: str, prefix: str = "", *, integer: bool = False
) -> Any:
    """`container[key]`: a finite, non-negative number (an integer when `integer`)."""
    from pcache.errors import UsageError
    from pcache.options.numbers import check_number

    name = prefix + key
    value = container.get(key)
    kinds = int if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds):
        expected = "an integer" if integer else "a number"
        raise InputError(source, f"invalid calibration: {name} must be {expected}", json_path=name)
    try:
        check_number(name, value, minimum=0)
    except UsageError as failure:
        raise InputError(source, f"invalid calibration: {failure}", json_path=name) from None
    return value if integer else float(value)


def load_calibration(path: str) -> Calibration:
    """A file written by `save_calibration`; anything else is an InputError naming it."""
    from pcache.prompt.reading.loading import display_name, read_bytes

    return _parse_calibration(read_bytes(path), display_name(path))


def read_calibration(path: str, run_model: str) -> tuple[Calibration, CalibrationUsed]:
    """`load_calibration`, and the file's identity for a report of a run sizing its cache for
    `run_model` on this machine (`pcache.replayer.calibration_used`)."""
    import hashlib

    from pcache.prompt.reading.loading import display_name, read_bytes
    from pcache.replayer.calibration_used import CalibrationUsed, mismatch_notes, this_machine

    source = display_name(path)
    data = read_bytes(path)
    fit = _parse_calibration(data, source)
    used = CalibrationUsed(
        path=source,
        sha256=hashlib.sha256(data).hexdigest(),
        engine_model=fit.engine_model,
        dtype=fit.dtype,
        device=fit.device,
        backend=fit.backend,
        machine=fit.machine,
        date=fit.date,
        samples=fit.samples,
        probes=fit.probes,
        rank=fit.rank,
        rms_error_ms=fit.rms_error_ms,
        notes=mismatch_notes(fit.engine_model, fit.machine, run_model, this_machine()),
    )
    return fit, used


def _parse_calibration(raw: bytes, source: str) -> Calibration:
    from pcache.prompt.reading.loading import parse_json

    data = parse_json(raw, source)
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise InputError(source, f"not a TTFT calibration file (expected format {FORMAT!r})")
    model = data.get("model")
    if not isinstance(model, dict):
        raise InputError(source, "invalid calibration: model must be an object", json_path="model")
    coefficients = [
        _number(model, key, source, "model.")
        for key in ("overhead_ms", "ms_per_token", "ms_per_pair")
    ]
    counts = [_number(data, key, source, integer=True) for key in ("samples", "rank", "probes")]
    described = {
        key: str(data.get(key, ""))
        for key in ("engine_model", "dtype", "device", "backend", "machine", "date")
    }
    return Calibration(
        TtftModel(*coefficients),
        counts[0],
        counts[1],
        _number(data, "rms_error_ms", source),
        counts[2],
        **described,
    )
