"""pcache: find out why a prompt cache misses, and what fixing it buys."""

__version__ = "0.1.0"
