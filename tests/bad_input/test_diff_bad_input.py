"""`pcache diff A B` when either side is bad: the bad side is named, exit 2."""

from __future__ import annotations

import json

import pytest

from tests.bad_input.checks import assert_one_line_error, unchanged
from tests.conftest import SAMPLES


@pytest.mark.parametrize("side", ["a", "b"])
@pytest.mark.parametrize(
    ("document", "fragment"),
    [
        ({"messages": {"role": "user"}}, "`messages` must be a list of messages, got an object"),
        ({"messages": [{"role": "user", "content": 3.5}]}, "got a number"),
        ([], "expected a JSON object (a request), got a list"),
    ],
)
def test_the_bad_side_is_named(cli, tmp_path, side, document, fragment):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(document))
    good = SAMPLES / "a.json"
    a, b = (bad, good) if side == "a" else (good, bad)
    with unchanged(tmp_path):
        assert_one_line_error(cli("diff", a, b), str(bad), fragment)


def test_two_requests_in_one_file_are_refused(cli, tmp_path):
    log = tmp_path / "two.jsonl"
    log.write_text('{"prompt": "a"}\n{"prompt": "b"}\n')
    assert_one_line_error(cli("diff", log, SAMPLES / "a.json"), str(log), "several requests")
