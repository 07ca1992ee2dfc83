"""`pcache serve`: the built-in engine behind an OpenAI-compatible HTTP API."""
