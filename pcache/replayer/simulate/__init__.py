"""`pcache replay --simulate` (the default): the cache policies, the serial and timed
simulation, the streaming pass over hash-id traces, and the capacity sweep."""
