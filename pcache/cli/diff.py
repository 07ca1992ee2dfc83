"""`pcache diff A B`: where two requests stop sharing a cached prefix, and why."""

from __future__ import annotations


def diff_command() -> None:
    """Compare two requests."""
    raise NotImplementedError
