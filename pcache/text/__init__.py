"""Text helpers every layer shares: values that change between requests (clocks, dates, ids,
per-user data), JSON paths as pcache prints them, and common-prefix lengths."""
