"""`pcache lint` ends without the interpreter's teardown: its whole output still arrives, its
exit code still says whether it found something, and a closed pipe still reads as one."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import ROOT, run_pcache


def test_the_whole_report_and_the_exit_code_arrive():
    done = run_pcache("lint", "samples/prompts", "--format", "json")
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    assert report["findings"] and report["summary"]["requests"] > 1
    done = run_pcache("lint", "samples/prompts", "--format", "json", "--exit-zero", "--verbose")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == report
    assert b"pcache: tokenizer gpt-oss" in done.stderr  # stderr is flushed too


def test_a_pipe_closed_before_the_report_is_exit_141():
    process = subprocess.Popen(
        [sys.executable, "-m", "pcache", "lint", "samples/prompts", "--exit-zero"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert process.stdout is not None
    process.stdout.close()  # long before the report is written (start-up alone takes longer)
    _, errors = process.communicate(timeout=120)
    assert process.returncode == 141, errors


def test_a_lint_inside_a_longer_process_keeps_nothing_and_returns():
    """Only the command line's own run pauses the collector and skips the teardown: a lint run
    by a test's runner (or a library) frees what it built and returns to its caller."""
    import gc

    from typer.testing import CliRunner

    from pcache.cli.app import app
    from pcache.rules.runner import _Run

    done = CliRunner().invoke(app, ["lint", str(ROOT / "samples/prompts"), "--exit-zero"])
    assert done.exit_code == 0, done.output
    assert gc.isenabled()
    gc.collect()
    assert not [item for item in gc.get_objects() if isinstance(item, _Run)]
