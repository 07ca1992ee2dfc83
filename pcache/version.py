"""pcache's version, the one the package is published under (`pyproject.toml` names it too)."""

from __future__ import annotations

__version__ = "0.1.0"
