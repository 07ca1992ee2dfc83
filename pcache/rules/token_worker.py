"""The token ids of one input file's requests, computed ahead of lint in a forked process.

Lint's per-request work (sessions, the reuse index, the rules) runs in input order on one
thread, and reading, rendering and encoding the requests is about half of what it does. With
more than one job (`--jobs`), lint forks a child before a large file: the child reads the same
file with the same reader, renders each chat request with the same renderer and options (the
parent's, as the fork left them), and sends each chunk of `RENDER_CHUNK` items while lint
works on the chunk before, each prompt as the numbers of its pieces, the ids of a piece sent
once (`SentPieces`, `ReceivedPieces`). The ids are those lint computes itself: any item the
child could not render, and every item after the child stopped for whatever reason, lint
renders as it does without a child. Lint still renders a request where a rule or a finding
needs its text.
"""

from __future__ import annotations

import os
from array import array
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Any

from pcache.errors import InputError
from pcache.process.forked import can_fork, end_child, fork_child

FORK_MIN_BYTES = 4 << 20
"""Files smaller than this are linted without a child: forking costs more than it saves
(`PCACHE_FORK_MIN_BYTES` sets another size)."""

PIPE_BYTES = 4 << 20
"""The pipe's capacity asked for: a few chunks' ids, so that the child can run ahead."""


def wanted(path: str, jobs: int) -> bool:
    """Whether to fork a child for `path`: more than one job, a regular file large enough, and
    Linux (macOS's system libraries are not safe to use in a forked child; Windows does not
    fork)."""
    if not can_fork(jobs) or path == "-":
        return False  # ("-" is standard input, read once)
    try:
        minimum = int(os.environ.get("PCACHE_FORK_MIN_BYTES", FORK_MIN_BYTES))
    except ValueError:
        minimum = FORK_MIN_BYTES
    try:
        return os.path.isfile(path) and os.path.getsize(path) >= minimum
    except OSError:
        return False


class TokenWorker:
    """The child forked for one file, and the end of the pipe its chunks arrive on."""

    def __init__(self, process: Any, connection: Any):
        self.process = process
        self.connection = connection
        self.stopped = False
        """The child sent its last chunk, failed, or went away: lint renders the rest."""
        self.chunks = 0
        """Chunks whose ids came from the child."""
        self.pieces = ReceivedPieces()
        self.hits = 0
        self.misses = 0
        """The child's segment-cache counts, once it has sent everything."""

    @classmethod
    def start(cls, chunks: Callable[[], Iterable[list]], stage: Any, jobs: int):
        """Fork the child for a file: `chunks()` reads it as lint does (its items, in chunks of
        `RENDER_CHUNK`); `stage` is lint's `RenderStage` (its renderer and options are the
        child's), and the child encodes on `jobs - 1` threads. None: no child could be had."""
        parallelism = os.environ.get("TOKENIZERS_PARALLELISM")
        os.environ["TOKENIZERS_PARALLELISM"] = "false"  # the Rust pool stays in this process
        try:
            started = fork_child(_child, chunks, stage, max(1, jobs - 1), name="pcache-tokens")
        finally:
            if parallelism is None:
                del os.environ["TOKENIZERS_PARALLELISM"]
            else:
                os.environ["TOKENIZERS_PARALLELISM"] = parallelism
        if started is None:
            return None
        process, receiving = started
        _widen(receiving)
        return cls(process, receiving)

    def ids_of(self, chunk: list) -> list[list[int] | None]:
        """The token ids of each item of the next chunk (None: lint renders it itself)."""
        message = self._next("chunk")
        if message is not None:
            _, keys, prompts, new, blob, dropped = message
            if keys == [_key(item) for item in chunk]:
                self.chunks += 1
                return self.pieces.receive(prompts, new, blob, dropped)
            self._stop()
        return [None] * len(chunk)

    def close(self) -> None:
        """Take the child's last message (its counts) and wait for it to exit."""
        message = self._next("done")
        if message is not None:
            self.hits, self.misses = message[1], message[2]
        if not self.stopped:
            self._stop()

    def _next(self, kind: str) -> tuple | None:
        """The child's next message if it is of this kind; else (another, or none: the child
        failed or went away) None, and the child is stopped."""
        if self.stopped:
            return None
        try:
            message = self.connection.recv()
        except (EOFError, OSError):
            message = None
        if isinstance(message, tuple) and message[0] == kind:
            return message
        self._stop()
        return None

    def _stop(self) -> None:
        self.stopped = True
        self.connection.close()
        end_child(self.process)


def _widen(connection: Any) -> None:
    """Make the pipe hold a chunk or more (Linux; else as it is): through the default 64 KiB,
    the child's chunk takes a wake-up of each side per 64 KiB, milliseconds on a VM."""
    import fcntl

    size = getattr(fcntl, "F_SETPIPE_SZ", None)
    if size is None:
        return
    for wanted_bytes in (PIPE_BYTES, 1 << 20):
        try:
            fcntl.fcntl(connection.fileno(), size, wanted_bytes)
            return
        except OSError:  # above /proc/sys/fs/pipe-max-size for this user
            continue


def _key(item: Any) -> tuple[str, int | None]:
    """What both sides see of an item: its kind and line (the chunks must agree)."""
    return (type(item).__name__, getattr(item, "line", None))


class ReceivedPieces:
    """Lint's side of the pieces: each piece's ids as one list, by the number the child gave
    it. A prompt is put together from its pieces' lists, so that prompts sharing a piece share
    its int objects, as prompts from lint's own segment cache do (`SegmentCachedRenderer`):
    comparing them over that piece finds each item identical without comparing values."""

    def __init__(self) -> None:
        self.lists: dict[int, list[int]] = {}

    def receive(self, prompts, new, blob: bytes, dropped) -> list[list[int] | None]:
        """The prompts of a chunk (each the numbers of its pieces, or None), the pieces new in
        it (numbers and lengths, their ids one after another in `blob`), and the pieces the
        child will not name again."""
        ids = array("i")
        ids.frombytes(blob)
        lists = self.lists
        start = 0
        for number, length in new:
            lists[number] = ids[start : start + length].tolist()
            start += length
        assert start == len(ids), "the ids of new pieces do not add up"
        result: list[list[int] | None] = []
        for numbers in prompts:
            if numbers is None:
                result.append(None)
                continue
            token_ids: list[int] = []
            for number in numbers:
                token_ids += lists[number]
            result.append(token_ids)
        for number in dropped:
            del lists[number]
        return result


class SentPieces:
    """The child's side: a number for each piece it has sent, while lint keeps its list; the
    pieces sent longest ago beyond `max_tokens` are dropped (lint is told, after the chunk)."""

    def __init__(self, max_tokens: int = 1 << 18):
        self.max_tokens = max_tokens
        self.tokens = 0
        self.numbers: OrderedDict[Any, tuple[int, int]] = OrderedDict()
        """Piece (its text, or the special token's text and id) -> number and length."""
        self.next_number = 0
        self.new: list[tuple[int, int]] = []
        self.ids = array("i")
        self.dropped: list[int] = []

    def number(self, key: Any, ids: array) -> int:
        """The piece's number, the piece sent in this chunk if it is new."""
        known = self.numbers.get(key)
        if known is not None:
            self.numbers.move_to_end(key)
            return known[0]
        number = self.next_number
        self.next_number += 1
        self.numbers[key] = (number, len(ids))
        self.tokens += len(ids)
        self.new.append((number, len(ids)))
        self.ids += ids if ids.typecode == "i" else array("i", ids)
        return number

    def one_off(self, ids: array) -> int:
        """A number for ids no later prompt names (a text not cut into pieces): sent in this
        chunk and dropped after it."""
        number = self.next_number
        self.next_number += 1
        self.new.append((number, len(ids)))
        self.ids += ids
        self.dropped.append(number)
        return number

    def take(self) -> tuple[list, bytes, list[int]]:
        """The chunk's new pieces, their ids and the numbers dropped, then a fresh chunk."""
        while self.tokens > self.max_tokens and len(self.numbers) > 1:
            _, (number, length) = self.numbers.popitem(last=False)
            self.tokens -= length
            self.dropped.append(number)
        taken = (self.new, self.ids.tobytes(), self.dropped)
        self.new, self.ids, self.dropped = [], array("i"), []
        return taken


def _child(chunks: Callable[[], Iterable[list]], stage: Any, jobs: int, connection) -> None:
    """The child: each chunk's ids, then the segment-cache counts; any failure ends it (lint
    renders what it did not send)."""
    try:
        renderer = stage.renderer
        renderer.after_fork()
        renderer.set_jobs(jobs)
        _send_chunks(chunks(), stage, connection)
        connection.send(("done", renderer.hits, renderer.misses))
    except BaseException:  # whatever it was, the parent goes on without the rest
        pass
    finally:
        connection.close()


def _send_chunks(chunks: Iterable[list], stage: Any, connection: Any) -> None:
    from pcache.prompt.shapes.request import Request
    from pcache.rules.context import is_chat

    renderer = stage.renderer
    sent = SentPieces()
    for chunk in chunks:
        chats = [item for item in chunk if isinstance(item, Request) and is_chat(item)]
        texts = dict(zip(map(id, chats), stage.prepare(chats), strict=True))
        prompts: list[list[int] | None] = []
        for item in chunk:
            text = texts.get(id(item))
            numbers = None
            if text is not None:
                try:
                    numbers = _numbers(renderer, sent, text[0])
                except (InputError, ValueError):
                    numbers = None  # lint renders it, and reports why it cannot
            prompts.append(numbers)
        keys = [_key(item) for item in chunk]
        connection.send(("chunk", keys, prompts, *sent.take()))


def _numbers(renderer: Any, sent: SentPieces, text: str) -> list[int]:
    """The numbers of the text's pieces, in order."""
    pieces = renderer.encoded_pieces(text)
    if pieces is None:
        return [sent.one_off(array("i", renderer.inner.encode(text)))]
    return [sent.number(key, ids) for key, ids in pieces]
