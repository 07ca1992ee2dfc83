"""pcache's built-in paged-attention engine (needs the `engine` extra: torch, safetensors)."""
