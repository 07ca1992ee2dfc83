"""The replayer: replay drivers (simulate, engine, endpoint), their options, and their one
report type. The API function over it is `pcache.replay` (`pcache.api.replay`)."""
