"""`pcache hash` (and the request loading every command shares) on bad requests."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from tests.bad_input.checks import assert_no_crash, assert_one_line_error, unchanged
from tests.bad_input.strategies import mutated_requests

USER = {"role": "user", "content": "hi"}
CASES = [
    (
        {"messages": [{"role": "assistant", "tool_calls": [{"function": "f"}]}]},
        "`messages[0].tool_calls[0].function` must be an object, got a string",
    ),
    (
        {"messages": [{"role": "assistant", "tool_calls": [{"function": [1]}]}]},
        "`messages[0].tool_calls[0].function` must be an object, got a list",
    ),
    ({"messages": "hi"}, "`messages` must be a list of messages, got a string"),
    ({"messages": [{"role": "wizard", "content": "x"}]}, "`messages[0].role` is 'wizard'"),
    ({"messages": [{"role": "user", "content": 5}]}, "`messages[0].content` must be a string"),
    ({"messages": [{"role": "user", "content": {"a": 1}}]}, "got an object"),
    ({"messages": [USER], "tools": [{"function": "f"}]}, "`tools[0].function` must be"),
    ({"token_ids": [1, 2**40]}, "`token_ids[1]` is 1099511627776, outside 0 to 2**32-1"),
    ({"token_ids": [2**70]}, "`token_ids[0]` is beyond 64 bits"),
    ({"token_ids": [1] * 20 + [-1]}, "`token_ids[20]` is -1, outside 0 to 2**32-1"),
    ({"token_ids": [1, 1.5]}, "`token_ids[1]` must be a non-negative integer, got a number"),
    ({"messages": [USER], "timestamp": "yesterday"}, "`timestamp` must be milliseconds"),
    (None, "expected a JSON object (a request), got null"),
    (
        {"system": "s", "messages": [{"role": "user", "content": [{"type": "tool_use"}]}]},
        None,
    ),
    (
        {"custom_id": "a", "url": "/v1/chat/completions", "body": {"messages": [{"role": 1}]}},
        "`body.messages[0].role` must be a string",
    ),
]


def write(folder: Path, name: str, value) -> Path:
    path = folder / name
    path.write_text(json.dumps(value, indent=1))
    return path


@pytest.mark.parametrize(("document", "fragment"), [c for c in CASES if c[1] is not None])
def test_a_bad_field_is_one_line_naming_file_line_column_and_path(
    cli, tmp_path, document, fragment
):
    path = write(tmp_path, "request.json", document)
    with unchanged(tmp_path):
        line = assert_one_line_error(cli("hash", path), f"{path}:", fragment)
    assert line.split(f"{path}:")[1].split(":")[0].isdigit(), line  # line:column given


def test_a_jsonl_line_is_named_with_its_line_and_column(cli, tmp_path):
    log = tmp_path / "log.jsonl"
    bad = {"messages": [{"role": "assistant", "tool_calls": [{"function": "f"}]}]}
    log.write_text(json.dumps({"prompt": "a"}) + "\n\n" + json.dumps(bad) + "\n")
    with unchanged(tmp_path):
        assert_one_line_error(cli("hash", log), f"{log}:3:", "tool_calls[0].function")


def test_deeply_nested_arguments_are_refused_at_load(cli, tmp_path):
    arguments = json.dumps(json.loads("[" * 900 + "]" * 900))
    call = {"function": {"name": "f", "arguments": arguments}}
    path = write(tmp_path, "deep.json", {"messages": [{"role": "assistant", "tool_calls": [call]}]})
    assert_one_line_error(cli("hash", path), str(path), "nests more than 100 levels")


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        ('{"prompt": "hi"}'.encode("utf-16"), "is UTF-16 text"),
        ('{"prompt": "hi"}'.encode("utf-16-le"), "is UTF-16 text"),
        ('{"prompt": "hi"}'.encode("utf-32"), "is UTF-32 text"),
        (b'{\n"prompt":\n"\xff"}', ":3:2: invalid UTF-8"),
        (b"\x89PNG\r\n\x1a\n\x00\x00", "binary file"),
        (b'{"token_ids": [1e999]}', "invalid JSON"),
        (b"[" * 5000 + b"]" * 5000, "nests more than 100 levels"),
    ],
)
def test_encodings_and_odd_bytes(cli, tmp_path, content, fragment):
    path = tmp_path / "odd.json"
    path.write_bytes(content)
    with unchanged(tmp_path):
        assert_one_line_error(cli("hash", path), str(path), fragment)


def test_a_utf8_byte_order_mark_is_read(cli, tmp_path):
    path = tmp_path / "bom.json"
    path.write_bytes(b'\xef\xbb\xbf{"prompt": "hi"}')
    assert cli("hash", path, "-t", "o200k_base").exit_code == 0


def test_an_unknown_tokenizer_lists_the_built_in_names(cli, tmp_path):
    path = write(tmp_path, "a.json", {"prompt": "hi"})
    assert_one_line_error(cli("hash", path, "-t", "bogus"), "gpt-oss", "o200k_base")


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(document=mutated_requests())
def test_any_hostile_field_is_rendered_or_refused_cleanly(cli, document):
    with tempfile.TemporaryDirectory() as folder:
        path = write(Path(folder), "request.json", document)
        with unchanged(Path(folder)):
            result = cli("hash", path)
        assert_no_crash(result)
        if result.exit_code == 2:
            assert_one_line_error(result, str(path))
