"""Replaying a trace: the drivers (simulate, engine, endpoint) and their report."""
