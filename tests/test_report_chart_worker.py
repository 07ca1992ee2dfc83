"""`pcache report`'s chart worker, started with `spawn`: the charts it draws are those drawn in
process, and where it cannot draw them the command draws them itself; the page the command
line writes with the worker is the page it writes without one."""

from __future__ import annotations

import pytest

from pcache.cli.chart_worker import ChartWorker
from pcache.report.build import ReportOptions, build_report
from pcache.report.page import chart_calls, draw_charts
from tests.conftest import SAMPLES, run_pcache

pytest.importorskip("matplotlib")


@pytest.fixture(scope="module")
def calls():
    return chart_calls(build_report(ReportOptions(paths=[str(SAMPLES / "prompts")])))


def test_the_worker_draws_the_charts_drawn_in_process(calls, monkeypatch):
    expected = draw_charts(calls)

    def not_here(calls):
        raise AssertionError("drawn in this process")

    monkeypatch.setattr("pcache.report.page.draw_charts", not_here)  # (the worker's is its own)
    with ChartWorker(jobs=2) as worker:
        assert worker.running
        worker.draw(calls)
        drawn = worker.charts()
        assert not worker.running
    assert drawn == expected
    assert drawn["capacity_chart"] and drawn["capacity_chart"].startswith("<svg")


def test_without_a_second_core_the_charts_are_drawn_here(calls):
    with ChartWorker(jobs=1) as worker:
        assert not worker.running
        worker.draw(calls)
        assert worker.charts() == draw_charts(calls)


def test_calls_the_worker_cannot_be_sent_are_drawn_here():
    calls = {"chart": (lambda label: f"<svg>{label}</svg>", ("here",))}  # (no pickle)
    with ChartWorker(jobs=2) as worker:
        worker.draw(calls)
        assert worker.charts() == {"chart": "<svg>here</svg>"}


def test_a_worker_never_sent_calls_ends_when_closed():
    worker = ChartWorker(jobs=2)
    process = worker.process
    worker.close()
    assert not worker.running and process.exitcode is not None


def test_the_command_line_writes_the_same_page_with_and_without_the_worker(tmp_path):
    pages = {}
    for jobs in ("1", "2"):
        output = tmp_path / f"report-{jobs}.html"
        done = run_pcache("report", "samples/prompts", "-o", output, "--jobs", jobs)
        assert done.returncode == 0, done.stderr
        pages[jobs] = output.read_text().replace(f"--jobs {jobs}", "--jobs N")
        pages[jobs] = pages[jobs].replace(output.name, "report.html")
    assert pages["1"] == pages["2"]
    assert pages["2"].count("<svg") >= 3
