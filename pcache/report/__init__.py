"""The HTML report: one self-contained page of what lint, diff and replay computed."""
