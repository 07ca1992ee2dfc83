"""`pcache replay --endpoint URL`: the trace against a live server: requests, streamed
clients, the server's own counts (usage, /metrics, /tokenize, KV events) and the report."""
