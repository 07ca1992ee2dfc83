"""The command line: one module per command; the only code in pcache that prints."""
