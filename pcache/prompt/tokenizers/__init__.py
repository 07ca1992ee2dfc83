"""Tokenizers: tiktoken offline, byte-level BPE through tiktoken, Hugging Face files and
pieces, the text codec, the piece cache and the encoder threads."""
