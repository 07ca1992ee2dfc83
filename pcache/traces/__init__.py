"""Replay traces: readers of every supported format, and synthesis."""
