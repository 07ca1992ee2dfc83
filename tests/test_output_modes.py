"""Outputs get the mode a new file gets under the user's umask; a file replaced keeps its own."""

from __future__ import annotations

import os
import stat

import pytest

from pcache.files import write_atomically
from tests.bad_input.test_fix_preserves import UNSORTED
from tests.conftest import SAMPLES

TRACE = SAMPLES / "traces" / "mooncake_tiny.jsonl"


@pytest.fixture(params=[0o022, 0o077, 0o002])
def umask(request):
    previous = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(previous)


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_a_new_file_gets_the_umask_mode(umask, tmp_path):
    write_atomically(tmp_path / "new.txt", [b"data\n"])
    assert mode(tmp_path / "new.txt") == 0o666 & ~umask
    assert os.listdir(tmp_path) == ["new.txt"]  # no temporary file left


@pytest.mark.parametrize("existing", [0o644, 0o600, 0o664, 0o444])
def test_a_replaced_file_keeps_its_mode(umask, tmp_path, existing):
    path = tmp_path / "old.txt"
    path.write_bytes(b"old\n")
    path.chmod(existing)
    write_atomically(path, [b"new\n"])
    assert path.read_bytes() == b"new\n" and mode(path) == existing


def test_keep_mode_false_gives_a_new_files_mode(umask, tmp_path):
    path = tmp_path / "old.txt"
    path.write_bytes(b"old\n")
    path.chmod(0o600)
    write_atomically(path, [b"new\n"], keep_mode=False)
    assert mode(path) == 0o666 & ~umask


def test_a_failed_write_leaves_the_old_file_and_its_mode(umask, tmp_path):
    path = tmp_path / "old.txt"
    path.write_bytes(b"old\n")
    path.chmod(0o640)

    def chunks():
        yield b"half"
        raise OSError(28, "No space left on device")

    with pytest.raises(Exception, match="No space left"):
        write_atomically(path, chunks())
    assert path.read_bytes() == b"old\n" and mode(path) == 0o640
    assert os.listdir(tmp_path) == ["old.txt"]


OUTPUTS = {
    "report.html": ["report", str(SAMPLES / "prompts"), "-o"],
    "report.json": ["report", str(TRACE), "--format", "json", "-o"],
    "synth.jsonl": ["trace", "synth", "--workload", "chat", "-n", "3", "--seed", "1", "-o"],
    "per_request.jsonl": ["replay", str(TRACE), "--simulate", "-o"],
}


@pytest.mark.parametrize("name", OUTPUTS)
def test_command_outputs_follow_the_umask_and_keep_an_existing_mode(cli, tmp_path, name):
    previous = os.umask(0o022)
    try:
        target = tmp_path / name
        result = cli(*OUTPUTS[name], str(target))
        assert result.exit_code == 0, result.output
        assert mode(target) == 0o644  # as `touch` would make it
        target.chmod(0o664)
        result = cli(*OUTPUTS[name], str(target))
        assert result.exit_code == 0, result.output
        assert mode(target) == 0o664
    finally:
        os.umask(previous)


@pytest.mark.parametrize("existing", [0o644, 0o600])
def test_fix_keeps_the_request_files_mode(cli, tmp_path, existing):
    previous = os.umask(0o077)
    try:
        path = tmp_path / "request.json"
        path.write_text(UNSORTED)
        path.chmod(existing)
        result = cli("lint", path, "--fix", "-f", "concise")
        assert result.exit_code in (0, 1), result.output
        assert path.read_text() != UNSORTED and mode(path) == existing
    finally:
        os.umask(previous)
