"""JSON paths to line:column: exact for any JSON text, whatever its layout, escapes or unicode."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from pcache.prompt.reading.json_positions import JsonPositions, parse_path

KEYS = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=0, max_size=6
)
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(10**12), 10**12)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=4),
    max_leaves=24,
)
LAYOUTS = st.sampled_from(
    [
        {"indent": None},
        {"indent": 1},
        {"indent": "\t", "ensure_ascii": False},
        {"separators": (",", ":"), "ensure_ascii": False},
        {"indent": 3, "ensure_ascii": True},
    ]
)


def _paths(value, path=()):
    yield path, value
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _paths(item, (*path, index))


@settings(max_examples=150, deadline=None)
@given(VALUES, LAYOUTS)
def test_every_path_points_at_its_value(value, layout):
    text = json.dumps(value, **layout)
    positions = JsonPositions(text)
    positions.check_integrity()
    decoder = json.JSONDecoder()
    for path, expected in _paths(value):
        offset = positions.offsets[path]
        decoded, _ = decoder.raw_decode(text, offset)
        assert decoded == expected or (decoded != decoded and expected != expected), path
        line, column = positions.line_column(offset)
        assert text.split("\n")[line - 1][column - 1 :].startswith(text[offset])


def test_string_paths_escapes_and_missing_paths():
    text = '{\n  "a": [1, {"b\\u00e9\\"": "s\\"]"}],\n  "é": {"x": [true]}\n}'
    positions = JsonPositions(text)
    assert parse_path("a[1].x") == ("a", 1, "x")
    assert positions.locate("a[1]") == (2, 12)
    assert positions.locate("é.x[0]") == (3, 15)
    assert positions.locate("é.missing") == positions.locate("é")
    assert positions.locate("") == (1, 1)
