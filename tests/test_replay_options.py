"""`pcache.replay(...)` refuses what `pcache replay` refuses, with the same message naming the
keyword instead of the flag: both go through the drivers' options (`pcache.replayer.options`),
whose fields declare the command's options once (`pcache.options.declared`)."""

from __future__ import annotations

import inspect

import pytest

import pcache
from pcache.errors import ArgumentValueError, InputError, OptionError, UsageError
from pcache.replayer.endpoint.options import EndpointOptions
from pcache.replayer.engine.options import EngineOptions
from pcache.replayer.simulate.options import SimulateOptions
from pcache.replayer.ttft import TtftModel
from tests.conftest import SAMPLES

TRACE = SAMPLES / "traces" / "mooncake_tiny.jsonl"
URL = "http://127.0.0.1:9/v1"  # nothing listens: none of these cases reaches it
ENGINE = ("--engine", "cpu", "--model", "tiny")
E = {"mode": "engine", "model": "tiny"}
P = {"mode": "endpoint", "url": URL}

REFUSED = [
    # (command-line flags, the same through the API)
    (("--simulate", "--save-calibration", "c.json"), {"save_calibration": "c.json"}),
    (("--simulate", "--repeat", "3"), {"repeat": 3}),
    (("--simulate", "--time-scale", "2"), {"time_scale": 2.0}),
    (("--simulate", "--max-output-tokens", "4"), {"max_output_tokens": 4}),
    (("--simulate", "--max-prompt-tokens", "4"), {"max_prompt_tokens": 4}),
    (("--simulate", "--warmup", "0"), {"warmup_rounds": 0}),
    (("--simulate", "--api", "chat"), {"api": "chat"}),
    (("--simulate", "--cache-blocks", "4", "--cache-gb", "1"), {"cache_blocks": 4, "cache_gb": 1}),
    (("--policy", "openai", "--cache-blocks", "4"), {"policy": "openai", "cache_blocks": 4}),
    (("--policy", "lfu"), {"policy": "lfu"}),
    (("--concurrency", "async"), {"concurrency": "async"}),
    (("--decode-rate", "0"), {"decode_rate": 0.0}),
    (("--cache-gb", "nan"), {"cache_gb": float("nan")}),
    (("--sweep-points", "1"), {"sweep_points": 1}),
    (("--cache-blocks", str(10**23)), {"cache_blocks": 10**23}),
    (("--ttft-overhead-ms", "-1"), {"ttft": TtftModel(overhead_ms=-1.0)}),
    (
        ("--calibration", "c.json", "--ttft-ms-per-token", "0.1"),
        {"calibration": "c.json", "ttft": TtftModel(ms_per_token=0.1)},
    ),
    (("--engine", "cpu"), {"mode": "engine"}),
    (("--engine", "tpu", "--model", "tiny"), {"mode": "engine", "device": "tpu", "model": "tiny"}),
    ((*ENGINE, "--calibration", "c.json"), {**E, "calibration": "c"}),
    (
        (*ENGINE, "--ttft-ms-per-pair", "0"),
        {**E, "ttft": TtftModel()},
    ),
    ((*ENGINE, "--policy", "radix"), {**E, "policy": "radix"}),
    ((*ENGINE, "--capacity-sweep"), {**E, "capacity_sweep": True}),
    ((*ENGINE, "--cache-gb", "1"), {**E, "cache_gb": 1.0}),
    ((*ENGINE, "--repeat", "0"), {**E, "repeat": 0}),
    ((*ENGINE, "--time-scale", "1e30"), {**E, "time_scale": 1e30}),
    ((*ENGINE, "--rate", "3"), {**E, "rate": 3.0}),
    (
        ("--endpoint", URL, "--capacity-sweep"),
        {**P, "capacity_sweep": True},
    ),
    (
        ("--endpoint", URL, "--concurrency", "timed"),
        {**P, "concurrency": "timed"},
    ),
    (("--endpoint", URL, "--repeat", "2"), {**P, "repeat": 2}),
    (("--endpoint", URL, "--policy", "radix"), {**P, "policy": "radix"}),
    (("--endpoint", URL, "--cache-gb", "1"), {**P, "cache_gb": 1.0}),
    (("--endpoint", URL, "--rate", "0"), {**P, "rate": 0.0}),
    (("--endpoint", "ftp://x/v1"), {"mode": "endpoint", "url": "ftp://x/v1"}),
]


@pytest.mark.parametrize(("flags", "keywords"), REFUSED)
def test_the_api_refuses_what_the_command_refuses_with_its_message(cli, flags, keywords):
    result = cli("replay", TRACE, *flags)
    assert result.exit_code == 2, result.output
    message = result.stderr.strip().removeprefix("pcache: error: ")
    with pytest.raises(ArgumentValueError) as refused:
        pcache.replay(TRACE, **keywords)
    assert isinstance(refused.value, UsageError | InputError)
    keyword = refused.value.argument
    assert keyword in keywords or keyword == "", keyword
    flag = message.removeprefix("unknown ").split()[0]
    # a refusal about one keyword names it where the command names its flag; any other
    # refusal (two options that conflict, a driver that has no such option) reads as the
    # command's, even where it begins with another option's flag
    expected = message.replace(flag, keyword, 1) if keyword else message
    assert str(refused.value) == f"pcache.replay: {expected}"
    assert refused.value.command_line == message


def test_an_options_object_is_checked_when_it_is_made():
    with pytest.raises(UsageError, match="give --cache-blocks or --cache-gb, not both"):
        SimulateOptions(cache_blocks=4, cache_gb=1.0)
    with pytest.raises(UsageError, match="--engine needs --model"):
        EngineOptions()
    with pytest.raises(UsageError, match="--retries must be between 0 and 100"):
        EndpointOptions(url=URL, model="m", retries=101)


def test_options_objects_and_keywords_replay_alike():
    options = SimulateOptions(cache_blocks=8, concurrency="timed")
    by_object = pcache.replay(TRACE, options).to_dict()
    assert by_object == pcache.replay(TRACE, cache_blocks=8, concurrency="timed").to_dict()
    changed = pcache.replay(TRACE, options, cache_blocks=4)
    assert changed.reports[0].capacity_blocks == 4
    with pytest.raises(UsageError, match="repeat applies to --engine and --gpu"):
        pcache.replay(TRACE, options, repeat=2)
    with pytest.raises(TypeError, match="no_such_option"):
        pcache.replay(TRACE, no_such_option=1)


def test_settings_keywords_fill_the_embedded_settings():
    requests = SAMPLES / "traces" / "requests_tiny.jsonl"
    assert pcache.replay(requests, block_size=32).reports[0].block_size == 32
    with pytest.raises(UsageError, match="date must be YYYY-MM-DD"):
        pcache.replay(TRACE, date="tomorrow")


def test_limit_keeps_the_first_requests():
    whole = pcache.replay(TRACE).reports[0]
    first = pcache.replay(TRACE, limit=3).reports[0]
    assert first.requests == 3 < whole.requests


def _cli_defaults() -> dict[str, object]:
    from pcache.cli.replay import replay_command

    return {
        name: parameter.default
        for name, parameter in inspect.signature(replay_command).parameters.items()
    }


@pytest.mark.parametrize(
    ("flag", "cls", "field"),
    [
        ("policy", SimulateOptions, "policy"),
        ("concurrency", SimulateOptions, "concurrency"),
        ("decode_rate", SimulateOptions, "decode_rate"),
        ("sweep_points", SimulateOptions, "sweep_points"),
        ("repeat", EngineOptions, "repeat"),
        ("time_scale", EngineOptions, "time_scale"),
        ("warmup_rounds", EngineOptions, "warmup_rounds"),
        ("api", EndpointOptions, "api"),
        ("burstiness", EndpointOptions, "burstiness"),
        ("timeout_s", EndpointOptions, "timeout_s"),
        ("request_timeout_s", EndpointOptions, "request_timeout_s"),
        ("retries", EndpointOptions, "retries"),
        ("trace_format", SimulateOptions, "trace_format"),
    ],
)
def test_the_commands_defaults_are_the_options_defaults(flag, cls, field):
    """The command shows its defaults in --help; an option of another driver left at its
    default is not refused, so the two must agree."""
    assert _cli_defaults()[flag] == cls.__dataclass_fields__[field].default


def test_an_option_error_names_the_field_and_words_it_as_each_caller_does():
    with pytest.raises(OptionError) as refused:
        EngineOptions(model="tiny", warmup_rounds=-1)
    assert refused.value.field == "warmup_rounds"
    assert str(refused.value) == "--warmup must be between 0 and 100, got -1"
    assert (
        refused.value.worded("warmup_rounds") == "warmup_rounds must be between 0 and 100, got -1"
    )
    with pytest.raises(ArgumentValueError) as named:
        pcache.replay(TRACE, mode="engine", model="tiny", warmup_rounds=-1)
    assert named.value.argument == "warmup_rounds"
    assert named.value.command_line == str(refused.value)


def test_every_option_of_a_driver_is_a_flag_of_the_command_in_its_panel(cli):
    from pcache.cli.replay_parameters import driver_fields
    from pcache.options.declared import PANELS

    result = cli("replay", "--help")
    assert result.exit_code == 0, result.output
    headings = [line.removesuffix(":") for line in result.stdout.splitlines() if line[:1].isupper()]
    assert [title for title in PANELS.values() if title in headings] == list(PANELS.values())
    for declared, _ in driver_fields().values():
        section = result.stdout.split(PANELS[declared.panel] + ":")[1].split("\n\n")[0]
        assert declared.flag in section, declared.flag
