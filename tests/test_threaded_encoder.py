"""`ThreadedEncoder`: a large batch encoded on threads in order; a forked child (lint's token
stage) encodes on a pool of its own, not on the parent's threads it did not inherit."""

from __future__ import annotations

import sys

import pytest

from pcache.prompt.tokenizers.threads import MIN_CHARACTERS_PER_THREAD, ThreadedEncoder


def lengths(text: str) -> list[int]:
    return [len(text)]


PIECES = [("x" * MIN_CHARACTERS_PER_THREAD) + str(number) for number in range(8)]


def test_a_large_batch_is_encoded_on_threads_in_order():
    encoder = ThreadedEncoder(lengths, threads=2)
    assert encoder(PIECES) == [lengths(piece) for piece in PIECES]
    assert encoder._pool is not None


def encode_in_child(encoder: ThreadedEncoder, sending) -> None:
    sending.send(encoder(PIECES))
    sending.close()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="forks on Linux only")
@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # (fork with the pool's threads)
def test_a_forked_child_encodes_on_a_pool_of_its_own():
    import multiprocessing

    encoder = ThreadedEncoder(lengths, threads=2)
    for _ in range(4):  # the pool's threads run in this process, idle between batches
        encoder(PIECES)
    context = multiprocessing.get_context("fork")
    receiving, sending = context.Pipe(duplex=False)
    child = context.Process(target=encode_in_child, args=(encoder, sending), daemon=True)
    child.start()
    sending.close()
    try:
        assert receiving.poll(30), "the child waits on threads it does not have"
        assert receiving.recv() == [lengths(piece) for piece in PIECES]
    finally:
        child.kill()
        child.join()
