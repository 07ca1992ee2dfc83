"""`pcache watch LOG`: lint a growing log as it grows, and serve what it finds.

`follow` reads the lines appended since the last poll (through rotation and truncation, never
holding a file open); `watcher` feeds them to one lint pass kept open between polls
(`pcache.rules.incremental`) and keeps the latest `WatchStatus`; `exposition` (Prometheus
text), `page` (the live page) and the command's text are views of it; `server` serves them.
"""
