"""Block math, chained block hashes, the block pool and its policies, provider profiles."""
