"""Special files, standard input and standard output, through a real process (subprocess):
FIFOs and devices are refused at once, closed streams give the documented exit codes."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading

import pytest

from tests.bad_input.checks import assert_one_line_error
from tests.conftest import ROOT, SAMPLES, run_pcache

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs (POSIX)")
TRACE = SAMPLES / "traces" / "mooncake_tiny.jsonl"


@pytest.fixture
def fifo(tmp_path):
    path = tmp_path / "requests.json"
    os.mkfifo(path)
    return path


def commands(special):
    """Every place a file is read, each given `special`."""
    return [
        ["hash", special],
        ["diff", special, SAMPLES / "a.json"],
        ["replay", special, "--simulate"],
        ["replay", TRACE, "--simulate", "--model", special],
        ["replay", TRACE, "--simulate", "--calibration", special],
        ["lint", SAMPLES / "a.json", "--config", special],
        ["generate", "--model", "tiny", "--prompt-ids", special],
    ]


def test_fifos_and_devices_are_refused_without_reading(fifo, tmp_path):
    cases = [(args, fifo, "is a FIFO") for args in commands(fifo)]
    cases += [(args, "/dev/zero", "is a character device") for args in commands("/dev/zero")]
    tokenizer = tmp_path / "model"
    tokenizer.mkdir()
    os.mkfifo(tokenizer / "tokenizer.json")
    cases.append((["hash", SAMPLES / "a.json", "-t", tokenizer], "tokenizer.json", "is a FIFO"))
    script = "; ".join(
        [
            "import sys",
            "from pcache.cli.app import main",
            "sys.argv = ['pcache', *sys.argv[1:]]",
            "main()",
        ]
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    for args, named, fragment in cases:
        result = subprocess.run(
            [sys.executable, "-c", script, *map(str, args)],
            capture_output=True,
            env=env,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
        assert_one_line_error(result, named, fragment)


def test_an_output_path_that_is_a_fifo_is_refused_and_kept(fifo):
    engine = ["--engine", "cpu", "--model", "tiny", "--save-calibration", fifo]
    for args in (["--simulate", "-o", fifo], engine):
        result = subprocess.run(
            [sys.executable, "-m", "pcache", "replay", str(TRACE), *map(str, args)],
            capture_output=True,
            env=dict(os.environ, PYTHONPATH=str(ROOT)),
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
        assert_one_line_error(result, fifo, "is a FIFO (named pipe), expected a regular file")
        assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_recording_into_a_fifo_fails_at_once_instead_of_hanging(fifo):
    from pcache.record.writer import LineWriter

    writer = LineWriter(fifo)
    written = []
    thread = threading.Thread(target=lambda: written.append(writer.write(b"{}\n")), daemon=True)
    thread.start()
    thread.join(10)
    assert written == [False] and writer.failures == 1
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_a_fifo_in_a_lint_set_is_a_finding_not_a_hang(fifo):
    result = run_pcache("lint", fifo, "-f", "concise", timeout=60)
    assert result.returncode == 1, result.stderr
    assert b"is a FIFO" in result.stdout and b"PC000" in result.stdout


def test_closed_stdin_is_one_line():
    result = subprocess.run(
        f"exec 0<&-; exec {sys.executable} -m pcache hash -",
        shell=True,
        capture_output=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        timeout=60,
    )
    assert_one_line_error(result, "<stdin>: standard input is closed")


def test_stdin_has_the_same_size_limit_as_files():
    result = subprocess.run(
        [sys.executable, "-m", "pcache", "hash", "-"],
        stdin=open("/dev/zero", "rb"),  # noqa: SIM115
        capture_output=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        timeout=120,
    )
    assert_one_line_error(result, "<stdin>")


def test_a_cut_output_never_exits_0_with_findings():
    """`lint -f json | head -c 10`: 141 (128 + SIGPIPE) once the pipe is closed; with the
    whole report still in the pipe's buffer the usual 1. Never 0."""
    command = (
        f"{sys.executable} -m pcache lint {SAMPLES / 'prompts'} -f json | head -c 10 >/dev/null;"
        " echo ${PIPESTATUS[0]}"
    )
    result = subprocess.run(
        ["bash", "-c", command],
        capture_output=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        timeout=120,
    )
    assert result.stdout.decode().strip() in ("1", "141"), result
    assert b"Traceback" not in result.stderr


def test_a_closed_stdout_exits_141():
    result = subprocess.run(
        f"exec >&-; {sys.executable} -m pcache hash {SAMPLES / 'a.json'}; echo $? >&2",
        shell=True,
        capture_output=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        timeout=60,
    )
    assert result.stderr.decode().strip().splitlines()[-1] == "141", result.stderr


def test_output_to_a_device_writes_through_it_and_keeps_the_device():
    """`-o /dev/null` discards the output; the device is written, never replaced."""
    before = os.stat("/dev/null")
    result = run_pcache("replay", TRACE, "--simulate", "-o", "/dev/null", timeout=60)
    assert result.returncode == 0, result.stderr
    after = os.stat("/dev/null")
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev
