"""The library API: the same results as the commands' JSON output, from files or from memory."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import asdict

import orjson
import pytest
from anthropic.types import Message

import pcache
from pcache.errors import InputError, UsageError
from tests.conftest import ROOT, SAMPLES
from tests.test_cli_basics import HEAVY

A, B = SAMPLES / "a.json", SAMPLES / "b.json"


def _imports(code: str) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()}


@pytest.mark.parametrize(
    "code", ["import pcache", "import pcache.record", "import pcache; pcache.diff; pcache.replay"]
)
def test_importing_the_api_imports_nothing_heavy(code):
    assert not _imports(code) & set(HEAVY)


def test_diff_of_files_is_the_commands_json(cli):
    result = pcache.diff(A, B)
    command = cli("diff", A, B, "--format", "json")
    assert orjson.loads(command.stdout) == orjson.loads(result.to_json())


def test_diff_of_bodies_equals_the_diff_of_their_files():
    from_files = pcache.diff(str(A), B)
    from_memory = pcache.diff(orjson.loads(A.read_bytes()), orjson.loads(B.read_bytes()))
    assert (from_memory.a, from_memory.b) == ("A", "B")
    from_memory.a, from_memory.b = from_files.a, from_files.b
    assert from_memory == from_files


def test_sdk_objects_are_read_as_the_json_they_serialize_to():
    reply = Message.model_validate(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-6",
            "content": [{"type": "text", "text": "It is out for delivery."}],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 10, "output_tokens": 6},
        }
    )
    first = {"system": "Parcel desk.", "messages": [{"role": "user", "content": "Where is P-42?"}]}
    second = {**first, "messages": [*first["messages"], reply, {"role": "user", "content": "OK"}]}
    as_json = {**second, "messages": [*first["messages"], reply.model_dump(mode="json")]}
    as_json["messages"].append({"role": "user", "content": "OK"})
    result = pcache.diff(first, second)
    assert result.cause.kind == "append"
    assert pcache.hash(second).block_hashes == pcache.hash(as_json).block_hashes


def test_hash_is_the_commands_json(cli):
    command = cli("hash", A, "--format", "json", "--block-size", "32")
    assert orjson.loads(command.stdout) == asdict(pcache.hash(A, block_size=32))


def test_hash_takes_exactly_one_request(tmp_path):
    log = tmp_path / "two.jsonl"
    log.write_bytes(A.read_bytes().replace(b"\n", b"") + b"\n" + B.read_bytes().replace(b"\n", b""))
    with pytest.raises(InputError, match="holds several requests"):
        pcache.hash(log)


def test_replay_of_a_file_is_the_commands_json(cli):
    trace = SAMPLES / "traces" / "requests_tiny.jsonl"
    command = cli("replay", trace, "--simulate", "--cache-blocks", "64", "--format", "json")
    assert command.exit_code == 0, command.output
    assert orjson.loads(command.stdout) == pcache.replay(trace, cache_blocks=64).to_dict()


def test_replay_of_bodies_in_memory_equals_the_replay_of_their_file():
    trace = SAMPLES / "traces" / "requests_tiny.jsonl"
    values = [orjson.loads(line) for line in trace.read_bytes().splitlines() if line.strip()]
    from_file = pcache.replay(trace).to_dict()
    from_memory = pcache.replay(values).to_dict()
    assert from_memory.pop("source") == "<memory>"
    from_file.pop("source")
    assert from_memory == from_file


def test_the_api_names_stay_functions_after_their_modules_are_imported():
    import pcache.divergence.compare as compare_module
    import pcache.replayer.run as run_module

    assert compare_module.common_prefix_length  # the module's own names are still there
    assert run_module.run_replay
    assert pcache.diff(A, B).cause is not None
    assert pcache.replay(SAMPLES / "traces" / "requests_tiny.jsonl").reports
    assert pcache.diff.__module__ == pcache.replay.__module__ == "pcache.api"  # functions only


def _clocked(seconds: int, *turns: str) -> dict:
    system = {"role": "system", "content": f"Parcel desk. Now: 2026-03-02 10:16:{seconds:02d} UTC."}
    return {"messages": [system, *({"role": "user", "content": turn} for turn in turns)]}


def test_lint_of_files_is_the_commands_json(cli):
    prompts = SAMPLES / "prompts"
    command = cli("lint", prompts, "--format", "json")
    report = pcache.lint(prompts)
    assert orjson.loads(command.stdout)["findings"] == [d.as_dict() for d in report.diagnostics]


def test_lint_of_bodies_in_memory():
    report = pcache.lint([_clocked(2, "Where is P-42?"), _clocked(9, "Where is P-42?", "Thanks")])
    clocks = [d for d in report.diagnostics if d.code == "PC101"]
    assert clocks and {d.json_path for d in clocks} == {"messages[0].content"}
    assert report.summary.requests == 2


def test_lint_takes_paths_or_requests_not_both():
    with pytest.raises(UsageError, match="paths or requests"):
        pcache.lint([A, orjson.loads(B.read_bytes())])
