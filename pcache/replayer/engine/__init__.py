"""`pcache replay --engine cpu|gpu`: the trace through the built-in engine, prefix caching on
and off, and how far the measurement can be trusted."""
