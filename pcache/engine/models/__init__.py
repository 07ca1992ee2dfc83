"""Decoder models (Llama, Qwen2, Qwen3) in the engine's packed layout."""
