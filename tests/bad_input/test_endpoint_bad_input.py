"""`pcache replay --endpoint`: bad numbers and malformed URLs are one line before any request
is sent (the URL below has no server; none of these cases reaches it)."""

from __future__ import annotations

import pytest

from tests.bad_input.checks import assert_one_line_error
from tests.conftest import SAMPLES

TRACE = SAMPLES / "traces" / "mooncake_tiny.jsonl"
NO_SERVER = "http://127.0.0.1:9/v1"


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--rate", "nan"], "--rate must be a finite number, got nan"),
        (["--rate", "0"], "--rate must be at least 0.001, got 0.0"),
        (["--rate", "1e-300"], "--rate must be at least 0.001"),
        (["--rate", "-inf"], "--rate must be a finite number, got -inf"),
        (["--rate", "5", "--burstiness", "0"], "--burstiness must be at least 0.01"),
        (["--rate", "5", "--burstiness", "nan"], "--burstiness must be a finite number"),
        (["--timeout", "inf"], "--timeout must be a finite number, got inf"),
        (["--timeout", "-1"], "--timeout must be greater than 0"),
        (["--retries", str(10**23)], "--retries must be between 0 and 100"),
        (["--vocab-size", str(10**23)], "--vocab-size must be between 2 and 4294967296"),
        (["--time-scale", "1e30"], "--time-scale must be between 0 and 1000.0"),
    ],
)
def test_numbers_are_checked_before_any_request(cli, args, fragment):
    result = cli("replay", TRACE, "--endpoint", NO_SERVER, "--model", "m", *args)
    assert_one_line_error(result, fragment)


@pytest.mark.parametrize(
    ("url", "fragment"),
    [
        ("ftp://127.0.0.1/v1", "must be an http:// or https:// URL"),
        ("http://127.0.0.1:99999/v1", "has port 99999, outside 1-65535"),
        ("http://127.0.0.1:ab/v1", "is not a valid URL"),
        ("http://[::1/v1", "is not a valid URL"),
        ("http://\N{SNOWMAN}:80/v1", "is not a valid URL"),
        ("http:///v1", "has no host"),
    ],
)
def test_a_malformed_url_is_named(cli, url, fragment):
    for model in (["--model", "m"], []):  # without --model, the model is asked of the server
        result = cli("replay", TRACE, "--endpoint", url, *model)
        assert_one_line_error(result, "--endpoint", fragment, repr(url))
