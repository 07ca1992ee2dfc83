"""Block math, chained block hashes, the block pool and its policies, provider profiles.

Five structures answer "what is cached"; each answers its own question, and a new consumer picks
the one whose question it asks instead of writing a sixth:

- `BlockPool` (`block_pool`, with `KVCacheManager` over it): which blocks would a vLLM server
  with this many blocks hold now, and what does the next request hit? Capacity, reference
  counts, lazy eviction in vLLM's order. The simulator's `vllm` policy and the engine's paged
  KV cache drive this one pool; a difference between them is a bug.
- `RadixCache` (`radix`): what would an SGLang-style tree (token-granular, LRU leaves) or a
  hosted API (TTL refreshed on use) hold now? The simulator's `radix` and provider policies.
- `PrefixIndex` (`reuse`): ignoring capacity and eviction, how many tokens of this prompt does it
  share with any earlier prompt of its cache salt? What an unlimited serial replay would hit,
  without the pool's bookkeeping: lint's costs, diff, and the engine replay's default capacity
  (its count of distinct full blocks) all ask it.
- `PrefixTrie` (`pcache.report.tree`): which requests share which prefix, and where do they
  part? The shape of the sharing that the report draws; no capacity, no rounding, so it never
  decides how many tokens are cached.
- `pcache.cache.hashing`: the block hashes themselves (vLLM's chained hashes or pcache's own),
  the keys the pool looks up; not a cache, the name every structure above agrees on.
"""
