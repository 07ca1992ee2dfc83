"""Requests in, rendered and tokenized prompts out: loading, rendering, tokenizers, provenance."""
