"""Lint's tokenization as executor tasks (`--executor ray`): each shard of a JSONL log is
rendered and its text encoded where the executor runs it; lint reads the ids back.

Lint's per-request work stays in this process, in input order (sessions, the reuse index and
the rules read every earlier request), and so does rendering, which the rules need with its
spans. What a task takes off it is the encoding: it renders its shard's chat requests with
the same tokenizer and template, cuts each text where the renderer's encoder cuts it
(`SegmentCachedRenderer`), and returns the ids of every distinct piece. Here, the renderer's
encoder first looks a piece up in the tables of the shards around the requests being linted
(`KnownPieces`) and encodes only what no task did. The ids of a piece do not depend on where
it is encoded, so the findings and numbers are those of a local run.
"""

from __future__ import annotations

from array import array
from collections import deque
from collections.abc import Sequence
from typing import Any

from pcache.errors import InputError
from pcache.executors.shards import Shard, ShardCutsChain, read_shard, shards_of_file

PieceTable = dict[str, array]


def shard_pieces(shard: Shard, tokenizer: str, options: Any) -> PieceTable:
    """The ids of every distinct piece of the shard's rendered chat requests (the task)."""
    from pcache.prompt.renderers.render import resolve_renderer
    from pcache.prompt.shapes.request import request_from_document
    from pcache.prompt.tokenizers.segment_cache import SegmentCachedRenderer
    from pcache.rules.context import is_chat

    renderer = SegmentCachedRenderer(resolve_renderer(tokenizer))
    encoder = renderer.encoder
    if encoder is None:
        return {}
    pieces: dict[str, None] = {}
    try:
        for entry in read_shard(shard):
            if isinstance(entry, InputError):
                continue
            try:
                request = request_from_document(entry[1], shard.path, entry[0])
                if not is_chat(request):
                    continue
                text = renderer.render_text_deferred(request, options)[0]
            except (InputError, ValueError):
                continue  # lint reports it where it renders it
            parts = encoder.parts(text)
            if parts is not None:
                pieces.update((piece, None) for piece in parts[::2])
    except ShardCutsChain:
        pass  # what was read so far is still right; later pieces are encoded by lint
    names = list(pieces)
    return {
        piece: array("I", ids)
        for piece, ids in zip(names, encoder.encode_pieces(names), strict=True)
    }


class KnownPieces:
    """A piece encoder that takes a piece's ids from `tables` when one holds it."""

    def __init__(self, inner: Any, tables: deque[PieceTable]):
        self.inner = inner
        self.tables = tables
        self.special_ids = inner.special_ids
        self.taken = 0
        """Pieces whose ids came from a task."""

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def parts(self, text: str):
        return self.inner.parts(text)

    def piece_starts(self, piece: str, ids: list[int]) -> list[int]:
        return self.inner.piece_starts(piece, ids)

    def encode_pieces(self, pieces: list[str]) -> list[Sequence[int]]:
        found: list[Sequence[int] | None] = []
        for piece in pieces:
            ids = next((table[piece] for table in self.tables if piece in table), None)
            found.append(None if ids is None else ids.tolist())
        missing = [piece for piece, ids in zip(pieces, found, strict=True) if ids is None]
        self.taken += len(pieces) - len(missing)
        encoded = iter(self.inner.encode_pieces(missing) if missing else ())
        return [next(encoded) if ids is None else ids for ids in found]


class RemotePieces:
    """The piece tables of one file's shards, read as lint reaches their lines."""

    def __init__(self, executor: Any, renderer: Any, tokenizer: str, options: Any, path: str):
        self.renderer = renderer
        self.shards = shards_of_file(path)
        self.results = executor.map(shard_pieces, self.shards, tokenizer, options)
        self.next_shard = 0
        self.tables: deque[PieceTable] = deque(maxlen=2)
        """The tables of the last two shards reached (a chunk of requests spans at most two)."""
        self.inner = renderer.encoder
        renderer.encoder = KnownPieces(self.inner, self.tables)

    def reach(self, line: int | None) -> None:
        """Read the tables of every shard that starts at or before `line`."""
        if line is None:
            return
        shards = self.shards
        while self.next_shard < len(shards) and shards[self.next_shard].first_line <= line:
            self.tables.append(next(self.results))
            self.next_shard += 1

    def close(self) -> None:
        self.renderer.encoder = self.inner
        self.tables.clear()
        for _ in self.results:  # let the remaining tasks finish before the next file's
            pass


def remote_pieces(executor: Any, renderer: Any, tokenizer: str, options: Any, path: str):
    """A `RemotePieces` for a JSONL file whose text a task can encode, else None."""
    from pcache.prompt.reading.loading import is_jsonl_name

    if executor is None or renderer.encoder is None or path == "-" or not is_jsonl_name(path):
        return None
    return RemotePieces(executor, renderer, tokenizer, options, path)
