"""`paused_gc`: no collection inside, what the block kept lands in the oldest generation; the
command line pauses the collector around a command, a library call leaves it as it was."""

from __future__ import annotations

import gc

import pytest

from pcache.cli.app import BATCH, REPLAY
from pcache.cli.process_policy import CommandLineProcess, applied
from pcache.process.gc_pause import paused_gc
from tests.conftest import SAMPLES


class Node:
    def __init__(self):
        self.other = self  # a cycle: only the collector frees it


def test_collection_resumes_with_what_the_block_kept_in_the_oldest_generation():
    assert gc.isenabled()
    with paused_gc():
        assert not gc.isenabled()
        kept = [[number] for number in range(1000)]
        Node()  # garbage the collector finds later
    assert gc.isenabled() and gc.get_freeze_count() == 0
    oldest = {id(item) for item in gc.get_objects(generation=2)}
    assert all(id(item) in oldest for item in kept)
    assert gc.get_count()[0] < 100  # no young generation to traverse at the next allocation
    assert gc.collect() >= 1  # the cycle is still collected


def test_nested_pauses_resume_once_and_others_frozen_objects_stay_frozen():
    gc.freeze()
    frozen = gc.get_freeze_count()
    try:
        with paused_gc():
            with paused_gc():
                pass
            assert not gc.isenabled()
        assert gc.isenabled() and gc.get_freeze_count() == frozen
    finally:
        gc.unfreeze()


@pytest.fixture
def collector_calls(monkeypatch) -> list[str]:
    """The calls that change the collector's state, recorded (and still made)."""
    calls: list[str] = []
    for name in ("disable", "enable", "freeze", "unfreeze", "set_threshold"):
        function = getattr(gc, name)

        def recorded(*arguments, _name=name, _function=function):
            calls.append(_name)
            return _function(*arguments)

        monkeypatch.setattr(gc, name, recorded)
    return calls


def test_library_calls_leave_the_collector_as_it_was(collector_calls, tmp_path):
    import pcache
    from pcache.defaults import DEFAULT_CHARS_PER_TOKEN, DEFAULT_ROUTER
    from pcache.replayer.fleet.options import fleet_from_flags
    from pcache.report.build import ReportOptions, build_report
    from pcache.report.page import render_page

    thresholds = gc.get_threshold()
    gc.set_threshold(500, 7, 9)  # the caller's own settings
    collector_calls.clear()
    try:
        pcache.lint([str(SAMPLES / "prompts")])
        pcache.replay(str(SAMPLES / "traces" / "mooncake_tiny.jsonl"))
        fleet = fleet_from_flags("2", DEFAULT_ROUTER, None, DEFAULT_CHARS_PER_TOKEN)
        pcache.replay(str(SAMPLES / "traces" / "requests_tiny.jsonl"), fleet=fleet)
        render_page(build_report(ReportOptions(paths=[str(SAMPLES / "prompts")])), "report")
        assert collector_calls == []
        assert gc.isenabled() and gc.get_threshold() == (500, 7, 9)
        assert gc.get_freeze_count() == 0
    finally:
        gc.set_threshold(*thresholds)


def observed(**arguments) -> bool:
    return gc.isenabled()


def test_the_command_line_pauses_the_collector_around_a_batch_command():
    process = CommandLineProcess()
    assert process.run(BATCH, observed, {}) is False
    assert gc.isenabled() and process.fast_exit
    assert process.run(BATCH, observed, {"executor": "ray"}) is False
    assert not process.fast_exit  # (a Ray cluster is stopped by its exit handler)


def test_replay_pauses_the_collector_only_when_it_simulates():
    process = CommandLineProcess()
    assert process.run(REPLAY, observed, {"device": None, "gpu": False, "url": None}) is False
    assert process.run(REPLAY, observed, {"device": "cpu", "gpu": False, "url": None}) is True
    assert process.run(REPLAY, observed, {"device": None, "gpu": False, "url": "http://x"})
    assert not process.fast_exit


def test_a_command_run_outside_the_command_line_runs_as_plain_code():
    assert applied(observed, BATCH)() is True  # no click context: no CommandLineProcess
