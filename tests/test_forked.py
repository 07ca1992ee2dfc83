"""`Forked` gives the value the function returns here, whether a child computed it, failed or
could not be started; `pcache report`'s sweep in a child changes nothing in the report."""

from __future__ import annotations

import os
import sys

import orjson
import pytest

from pcache.process.forked import Forked, Standby
from tests.executor_logs import request_log

LINUX = sys.platform.startswith("linux")


def pid_and_square(value: int) -> tuple[int, int]:
    return os.getpid(), value * value


def dies(value: int) -> int:
    if os.getpid() != PARENT:
        os._exit(7)  # the child goes away without a word
    return value + 1


def raises_in_child(value: int) -> int:
    if os.getpid() != PARENT:
        raise RuntimeError("only in the child")
    return value - 1


PARENT = os.getpid()


@pytest.mark.skipif(not LINUX, reason="forks on Linux only")
def test_a_child_computes_what_the_function_returns():
    forked = Forked(pid_and_square, 12, jobs=2)
    assert forked.in_child
    pid, square = forked.result()
    assert square == 144 and pid != os.getpid()
    assert not forked.in_child  # (waited for)


def test_one_job_computes_here():
    forked = Forked(pid_and_square, 3, jobs=1)
    assert not forked.in_child
    assert forked.result() == (os.getpid(), 9)


@pytest.mark.skipif(not LINUX, reason="forks on Linux only")
@pytest.mark.parametrize("function", [dies, raises_in_child])
def test_a_child_that_fails_leaves_the_result_to_this_process(monkeypatch, function):
    monkeypatch.setattr(sys.modules[__name__], "PARENT", os.getpid())
    forked = Forked(function, 10, jobs=2)
    assert forked.in_child
    assert forked.result() == function(10)


def test_report_is_the_same_with_the_sweep_in_a_child(tmp_path, cli):
    log = request_log(tmp_path / "log.jsonl")
    pages = []
    for jobs in ("1", "2"):
        result = cli("report", log, "--format", "json", "-o", "-", "--jobs", jobs)
        assert result.exit_code == 0, result.output
        pages.append(orjson.loads(result.stdout))
    assert pages[0] == pages[1]
    assert len(pages[0]["sweep"]) >= 2


def prepared_value() -> None:
    os.environ["PCACHE_TEST_PREPARED"] = "yes"  # (in the child only)


def pid_and_prepared(value: int) -> tuple[int, str | None, int]:
    return os.getpid(), os.environ.get("PCACHE_TEST_PREPARED"), value * 2


@pytest.mark.skipif(not LINUX, reason="forks on Linux only")
def test_a_standby_child_prepares_then_computes_the_call():
    with Standby(prepared_value, jobs=2) as standby:
        assert standby.in_child
        standby.call(pid_and_prepared, 21)
        pid, prepared, doubled = standby.result()
    assert (prepared, doubled) == ("yes", 42) and pid != os.getpid()
    assert "PCACHE_TEST_PREPARED" not in os.environ


def test_a_standby_with_one_job_computes_here():
    with Standby(prepared_value, jobs=1) as standby:
        assert not standby.in_child
        standby.call(pid_and_square, 5)
        assert standby.result() == (os.getpid(), 25)


@pytest.mark.skipif(not LINUX, reason="forks on Linux only")
@pytest.mark.parametrize("function", [dies, raises_in_child])
def test_a_standby_child_that_fails_leaves_the_call_to_this_process(monkeypatch, function):
    monkeypatch.setattr(sys.modules[__name__], "PARENT", os.getpid())
    with Standby(prepared_value, jobs=2) as standby:
        standby.call(function, 10)
        assert standby.result() == function(10)


@pytest.mark.skipif(not LINUX, reason="forks on Linux only")
def test_a_call_that_cannot_be_sent_is_computed_here():
    with Standby(prepared_value, jobs=2) as standby:
        standby.call(lambda value: (os.getpid(), value), 3)  # (a lambda does not pickle)
        assert not standby.in_child
        assert standby.result() == (os.getpid(), 3)


@pytest.mark.skipif(not LINUX, reason="forks on Linux only")
def test_a_standby_closed_without_a_call_ends_its_child():
    standby = Standby(prepared_value, jobs=2)
    process = standby.process
    standby.close()
    assert not process.is_alive() and process.exitcode == 0


def test_the_page_is_the_same_with_its_charts_drawn_in_a_child(tmp_path, cli):
    log = request_log(tmp_path / "log.jsonl")
    pages = []
    for jobs in ("1", "2"):
        page = tmp_path / f"report-{jobs}.html"
        result = cli("report", log, "-o", page, "--jobs", jobs)
        assert result.exit_code == 0, result.output
        pages.append(page.read_text())
    assert pages[0] == pages[1]
    assert pages[0].count("<svg") >= 3
