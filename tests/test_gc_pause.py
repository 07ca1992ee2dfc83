"""`paused_gc`: no collection inside, what the block kept lands in the oldest generation."""

from __future__ import annotations

import gc

from pcache.process.gc_pause import paused_gc


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
