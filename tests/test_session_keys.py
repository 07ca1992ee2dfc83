"""Session keys: a message's key ignores whitespace the way `squash` does, whatever the text."""

from __future__ import annotations

import unicodedata

from hypothesis import example, given
from hypothesis import strategies as st

from pcache.divergence.history import squash
from pcache.divergence.sessions import message_key

SPACES = list(" \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f\x85\xa0\u2028\u3000")
PARTS = st.sampled_from([*SPACES, "a", "B", ".", "e\u0301", "\u00e9"]) | st.characters()
TEXT = st.lists(PARTS, max_size=30).map("".join)
"""Words, every whitespace `str.split` cuts at, and an accent both composed and not."""


@given(TEXT)
def test_the_ascii_shortcut_equals_squash(text: str):
    assert squash(text) == " ".join(unicodedata.normalize("NFC", text).split())


@given(TEXT, TEXT)
@example("", "\ud800")  # a lone surrogate (a str from Python, not from JSON) has a key too
def test_keys_agree_exactly_when_the_squashed_texts_do(a: str, b: str):
    same = message_key({"role": "user", "content": a}) == message_key(
        {"role": "user", "content": b}
    )
    assert same == (squash(a) == squash(b))
