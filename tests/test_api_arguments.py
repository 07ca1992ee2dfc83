"""The library API's one validation layer: every bad argument is a `pcache.InputError`
subclass naming the function and the argument, never a bare TypeError, RecursionError or a
silent default; in-memory values are held to the limits files are."""

from __future__ import annotations

import math
import os

import orjson
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import pcache
from pcache.errors import (
    ArgumentTypeError,
    ArgumentValueError,
    CycleError,
    InputError,
    NestingError,
    NotJsonError,
    UsageError,
)
from pcache.prompt.shapes.fields import MAX_NESTING
from pcache.record import assert_cacheable, assert_prefix_stable
from tests.conftest import SAMPLES

BODY = {"messages": [{"role": "user", "content": "Where is P-42?"}]}
TRACE = SAMPLES / "traces" / "requests_tiny.jsonl"


def _nested(depth: int) -> dict:
    """A request whose `metadata` nests `depth` objects."""
    value: dict = {}
    for _ in range(depth - 1):
        value = {"a": value}
    return {**BODY, "extra": value}


def _cyclic_dict() -> dict:
    body = dict(BODY)
    body["self"] = body
    return body


def _cyclic_list() -> dict:
    messages: list = [{"role": "user", "content": "x"}]
    messages.append(messages)
    return {"messages": messages}


CALLS = {
    "hash": lambda value: pcache.hash(value),
    "diff a": lambda value: pcache.diff(value, BODY),
    "diff b": lambda value: pcache.diff(BODY, value),
    "lint": lambda value: pcache.lint(value),
    "lint list": lambda value: pcache.lint([value]),
    "replay": lambda value: pcache.replay(value),
    "replay list": lambda value: pcache.replay([value]),
    "assert_cacheable": lambda value: assert_cacheable([value], 0.0),
    "assert_prefix_stable": lambda value: assert_prefix_stable([value]),
}


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: pcache.lint(None), ArgumentTypeError, "pcache.lint: requests_or_paths must be"),
        (lambda: pcache.diff(5, BODY), ArgumentTypeError, "pcache.diff: a must be"),
        (lambda: pcache.diff(BODY, {1, 2}), ArgumentTypeError, "pcache.diff: b must be"),
        (lambda: pcache.hash(object()), ArgumentTypeError, "request must be a request body"),
        (lambda: pcache.replay(None), ArgumentTypeError, "pcache.replay: trace must be"),
        (lambda: pcache.replay(5), ArgumentTypeError, "pcache.replay: trace must be"),
        (lambda: pcache.lint(b'{"prompt": "x"}'), ArgumentTypeError, "requests_or_paths is bytes"),
        (lambda: pcache.hash(b"{}"), ArgumentTypeError, "pcache.hash: request is bytes"),
        (lambda: pcache.lint('{"prompt": "x"}'), ArgumentValueError, "is JSON text, not a path"),
        (lambda: pcache.hash("a\x00b"), ArgumentValueError, "request must be a path"),
        (lambda: pcache.lint([BODY], block_size=0), ArgumentValueError, "block_size must be"),
        (lambda: pcache.lint([BODY], block_size="16"), ArgumentTypeError, "got '16'"),
        (lambda: pcache.hash(BODY, block_size=-1), ArgumentValueError, "from 1 to"),
        (lambda: pcache.hash(BODY, block_size=True), ArgumentTypeError, "got True"),
        (lambda: pcache.hash(BODY, block_size=16.0), ArgumentTypeError, "got 16.0"),
        (lambda: pcache.hash(BODY, block_size=2**40), ArgumentValueError, "block_size"),
        (lambda: pcache.hash(BODY, tokenizer=""), ArgumentValueError, "tokenizer must be"),
        (lambda: pcache.hash(BODY, tokenizer=5), ArgumentTypeError, "tokenizer must be"),
        (lambda: pcache.hash(BODY, hash_algo="md5"), ArgumentValueError, "hash_algo must be one"),
        (lambda: pcache.hash(BODY, cache_salt=5), ArgumentTypeError, "cache_salt must be"),
        (lambda: pcache.hash(BODY, date=5), ArgumentTypeError, "date must be"),
        (lambda: pcache.hash(BODY, date="2026-13-01"), ArgumentValueError, "date must be YYYY"),
        (lambda: pcache.lint([BODY], select="PC1"), ArgumentTypeError, "select must be a list"),
        (lambda: pcache.lint([BODY], select=["PC9Z"]), ArgumentValueError, "select: unknown"),
        (lambda: pcache.lint([BODY], profile=5), ArgumentTypeError, "profile must be one of"),
        (lambda: pcache.lint([BODY], fix=1), ArgumentTypeError, "fix must be True or False"),
        (lambda: pcache.lint([BODY], fix=True), ArgumentValueError, "fix applies to files"),
        (lambda: pcache.lint([BODY], config=5), ArgumentTypeError, "config must be a path"),
        (lambda: pcache.lint([BODY], progress=5), ArgumentTypeError, "progress must be"),
        (lambda: pcache.replay([BODY], cache_blocks=0), ArgumentValueError, "cache_blocks must"),
        (lambda: pcache.replay([BODY], cache_blocks=1.5), ArgumentTypeError, "cache_blocks"),
        (lambda: pcache.replay([BODY], cache_gb=math.nan), ArgumentValueError, "cache_gb must"),
        (lambda: pcache.replay([BODY], decode_rate="fast"), ArgumentTypeError, "decode_rate"),
        (lambda: pcache.replay([BODY], mode="warp"), ArgumentValueError, "mode must be one of"),
        (lambda: pcache.replay([BODY], options=5), ArgumentTypeError, "options must be"),
        (lambda: pcache.replay([BODY], nope=1), ArgumentTypeError, "unexpected keyword"),
        (lambda: pcache.replay([BODY], calibration="\x00"), ArgumentValueError, "calibration"),
        (lambda: pcache.replay([BODY], model="a\x00"), ArgumentValueError, "without NUL"),
        (lambda: pcache.replay([BODY], model="nope"), ArgumentValueError, "model 'nope' is"),
        (lambda: pcache.hash(BODY, tokenizer="no-such"), ArgumentValueError, "tokenizer no-such"),
        (lambda: pcache.hash("\ud800"), ArgumentValueError, "request must be a path the file"),
        (lambda: assert_cacheable([BODY], math.nan), ArgumentValueError, "min_ratio must be"),
        (lambda: assert_cacheable([BODY], 1.5), ArgumentValueError, "from 0 to 1, got 1.5"),
        (lambda: assert_cacheable([BODY], "0.5"), ArgumentTypeError, "min_ratio must be"),
        (lambda: assert_cacheable([BODY], True), ArgumentTypeError, "min_ratio must be"),
        (lambda: assert_cacheable(None, 0.5), ArgumentTypeError, "requests must be"),
        (lambda: assert_prefix_stable([BODY], block_size=0), ArgumentValueError, "block_size"),
        (
            lambda: pcache.replay([BODY], trace_format="csv"),
            ArgumentValueError,
            "pcache.replay: trace_format must be one of",
        ),
        (
            lambda: pcache.lint([str(TRACE)], column="body"),
            ArgumentValueError,
            "pcache.lint: column body: no table input",
        ),
    ],
)
def test_a_bad_argument_is_a_typed_error_naming_it(call, error, message):
    with pytest.raises(error, match=None) as raised:
        call()
    assert isinstance(raised.value, InputError) and isinstance(raised.value, UsageError)
    assert message in str(raised.value)
    assert "\n" not in str(raised.value)
    assert str(raised.value).startswith("pcache.")


def test_type_and_value_errors_are_still_the_builtin_kinds():
    with pytest.raises(TypeError):
        pcache.hash(object())
    with pytest.raises(ValueError):
        pcache.lint([BODY], block_size=0)
    assert issubclass(pcache.ArgumentError, pcache.InputError)
    assert {"InputError", "ArgumentError", "NestingError", "CycleError"} <= set(pcache.__all__)


@pytest.mark.parametrize("name", sorted(CALLS))
@pytest.mark.parametrize(
    ("make", "error", "message"),
    [
        (lambda: _nested(100_000), NestingError, f"nests more than {MAX_NESTING} levels"),
        (lambda: _nested(MAX_NESTING + 1), NestingError, f"nests more than {MAX_NESTING}"),
        (_cyclic_dict, CycleError, "`self` contains itself (a cycle)"),
        (_cyclic_list, CycleError, "`messages[1]` contains itself (a cycle)"),
        (lambda: {**BODY, "n": math.nan}, NotJsonError, "`n` is nan; JSON has no NaN"),
        (lambda: {**BODY, 5: "x"}, NotJsonError, "has a key 5; JSON keys are strings"),
        (lambda: {**BODY, "s": {1, 2}}, NotJsonError, "`s` is a set, not a JSON value"),
        (lambda: {**BODY, "b": b"x"}, NotJsonError, "`b` is bytes, not a JSON value"),
        (lambda: {**BODY, "t": "\ud800"}, NotJsonError, "`t` is not Unicode text"),
    ],
)
def test_values_no_json_document_holds_are_refused_by_every_function(name, make, error, message):
    with pytest.raises(error) as raised:
        CALLS[name](make())
    assert message in str(raised.value)


def test_in_memory_nesting_meets_the_limit_a_file_meets(tmp_path, cli):
    deep = _nested(MAX_NESTING + 1)
    path = tmp_path / "deep.json"
    path.write_bytes(orjson.dumps(deep))
    with pytest.raises(NestingError) as from_file:
        pcache.hash(path)
    with pytest.raises(NestingError) as from_memory:
        pcache.hash(deep)
    assert from_file.value.message == from_memory.value.message
    pcache.hash(_nested(MAX_NESTING))  # the limit itself is read


@pytest.mark.parametrize("depth", [MAX_NESTING + 1, 1100, 100_000])
@pytest.mark.parametrize("command", ["hash", "diff", "replay"])
def test_a_deeply_nested_file_is_one_line_at_its_place(tmp_path, cli, depth, command):
    path = tmp_path / ("deep.jsonl" if command == "replay" else "deep.json")
    path.write_text('{"prompt": "x", "m": ' + "[" * depth + "]" * depth + "}\n")
    arguments = [path, path] if command == "diff" else [path]
    result = cli(command, *arguments)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and len(result.stderr.strip().splitlines()) == 1
    assert f"nests more than {MAX_NESTING} levels" in result.stderr
    if command != "replay":
        assert f"{path}:1:" in result.stderr


def test_a_deeply_nested_pyproject_is_one_line_at_its_place(tmp_path, cli, monkeypatch):
    (tmp_path / "pyproject.toml").write_text(
        "[tool.pcache.lint]\nx = " + "[" * 5000 + "]" * 5000 + "\n"
    )
    (tmp_path / "a.json").write_bytes(orjson.dumps(BODY))
    monkeypatch.chdir(tmp_path)
    result = cli("lint", "a.json")
    assert result.exit_code == 2, result.output
    assert f"pyproject.toml:2:{MAX_NESTING + 6}: nests more than" in result.stderr


def test_one_value_in_several_places_is_not_a_cycle():
    message = {"role": "user", "content": "Hi"}
    assert pcache.hash({"messages": [message, message]}).num_tokens > 0


def test_a_single_body_is_linted_as_one_request():
    assert pcache.lint(BODY).summary.requests == 1
    assert pcache.lint(BODY for _ in range(2)).summary.requests == 2


def test_block_size_none_is_the_default_and_given_is_used():
    assert pcache.lint([BODY]).summary.requests == 1
    assert pcache.hash(BODY).block_size == 16
    assert pcache.hash(BODY, block_size=1).block_size == 1


def test_an_sdk_object_whose_dump_fails_is_named():
    class Broken:
        def model_dump(self, **_):
            raise RuntimeError("cannot dump")

    with pytest.raises(NotJsonError, match=r"`messages\[0\]` is an SDK object whose model_dump"):
        pcache.hash({"messages": [Broken()]})


def test_an_exception_of_the_callers_own_iterator_passes_through():
    def requests():
        yield BODY
        raise KeyError("the caller's own")

    with pytest.raises(KeyError, match="the caller's own"):
        pcache.lint(requests())


def test_bounds_of_min_ratio_are_accepted():
    assert assert_cacheable([BODY], 0) == 0.0
    with pytest.raises(AssertionError):
        assert_cacheable([BODY], 1)


def _no_file(text: str) -> bool:
    return "/" not in text and text not in (".", "..") and not os.path.lexists(text)


LEAVES = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(max_size=8).filter(_no_file)
    | st.binary(max_size=4)
    | st.builds(object)
)
VALUES = st.recursive(
    LEAVES,
    lambda children: (
        st.lists(children, max_size=3)
        | st.tuples(children, children)
        | st.dictionaries(st.text(max_size=6) | st.integers(), children, max_size=3)
    ),
    max_leaves=12,
)
REQUEST_SHAPED = st.fixed_dictionaries({"prompt": VALUES}) | st.fixed_dictionaries(
    {
        "messages": st.lists(
            st.fixed_dictionaries(
                {"role": st.sampled_from(["user", "system", "assistant"]) | VALUES},
                optional={"content": VALUES, "tool_calls": VALUES},
            ),
            max_size=3,
        )
    },
    optional={"tools": VALUES, "model": VALUES},
)


@pytest.mark.parametrize("name", sorted(CALLS))
@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(value=VALUES | REQUEST_SHAPED)
@example(value=None)
@example(value=object())
@example(value={"prompt": "x", "self": []})
def test_any_value_works_or_is_an_input_error(name, value):
    try:
        CALLS[name](value)
    except InputError:
        pass
    except AssertionError:
        assert name.startswith("assert_")  # the assertion itself failing is its answer


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(alphabet=st.characters(codec="utf-8")),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.text(alphabet=st.characters(codec="utf-8"), max_size=5), children)
    ),
    max_leaves=30,
)


@settings(max_examples=200, deadline=None)
@given(value=JSON_VALUES)
def test_a_json_value_in_memory_is_read_as_its_document(value):
    from pcache.prompt.reading.memory_values import json_value

    copied = json_value(value, "<memory>")
    assert copied == value
    assert orjson.loads(orjson.dumps(value)) == copied  # what a file of it would hold
    if isinstance(value, dict | list) and value:
        assert copied is not value


def test_the_commands_that_call_the_api_keep_their_flags_words(cli, tmp_path):
    path = tmp_path / "a.json"
    path.write_bytes(orjson.dumps(BODY))
    result = cli("lint", path, "--select", "PC9Z")
    assert result.exit_code == 2, result.output
    assert "--select: unknown rule code" in result.stderr and "pcache.lint" not in result.stderr
    with pytest.raises(ArgumentValueError) as raised:
        pcache.lint(path, select=["PC9Z"])
    assert str(raised.value).startswith("pcache.lint: select: unknown rule code")
    assert raised.value.command_line.startswith("--select: unknown rule code")
