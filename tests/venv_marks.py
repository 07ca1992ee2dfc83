"""The venv a suite of tests needs (built by one of bench/*/install.sh), or why there is none,
and the marks that tie the suite's tests to it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def suite_venv(variable: str, script: str, kind: str, required: tuple[str, ...] = ()) -> Path | str:
    """The venv `variable` names, or why there is none: unset, or without READY (which
    `script` touches last) or one of the `required` files."""
    value = os.environ.get(variable)
    if not value:
        return f"{variable} is not set ({script} VENV builds one)"
    venv = Path(value)
    if not all((venv / name).is_file() for name in ("READY", *required)):
        missing = ", ".join(f"no {Path(name).name}" for name in ("READY", *required))
        return f"{variable}={venv} is not a complete {kind} venv ({missing})"
    return venv


def mark_suite(items, folder: Path, marker: str, venv: Path | str) -> None:
    """Marks each test under `folder` with `marker`, and skips it when `venv` is a reason."""
    for item in items:
        if folder in Path(str(item.fspath)).parents:
            item.add_marker(getattr(pytest.mark, marker))
            if isinstance(venv, str):
                item.add_marker(pytest.mark.skip(reason=venv))
