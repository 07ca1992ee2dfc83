"""`pcache trace synth`: every number through the one check."""

from __future__ import annotations

import pytest

from tests.bad_input.checks import assert_one_line_error


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--rate", "inf"], "--rate must be a finite number, got inf"),
        (["--rate", "0"], "--rate must be greater than 0, got 0.0"),
        (["--zipf-alpha", "-1"], "--zipf-alpha must be greater than 0"),
        (["--groups", "0"], "--groups must be between 1 and"),
        (["--turns", str(10**30)], "--turns must be between 1 and"),
        (["--seed", str(2**64)], "--seed must be between 0 and"),
    ],
)
def test_numbers(cli, args, fragment):
    assert_one_line_error(cli("trace", "synth", "-n", "3", *args), fragment)
