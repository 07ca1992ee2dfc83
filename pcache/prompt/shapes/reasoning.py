"""The keys an assistant message's reasoning goes by, and the order each reader takes them in."""

from __future__ import annotations

REASONING_KEYS = ("reasoning_content", "reasoning", "thinking")
"""Names of a message's reasoning, in the order a request is read: a normalized message keeps
its keys in this order, and lint reads the first one set."""

TEMPLATE_REASONING_KEYS = tuple(sorted(REASONING_KEYS, key=lambda key: key == "reasoning"))
"""The same names in the order a chat template is handed them: `reasoning_content` (what
templates read), then `thinking` (gpt-oss), the bare `reasoning` last."""
