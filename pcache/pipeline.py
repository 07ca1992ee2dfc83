"""The one data path every command shares: file -> Request -> RenderedPrompt -> block hashes."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pcache.cache.hashing import (
    HashSettings,
    block_hashes,
)
from pcache.errors import InputError
from pcache.prompt.reading.loading import Document, iter_documents
from pcache.prompt.renderers.interface import RenderOptions
from pcache.prompt.renderers.render import render, resolve_renderer
from pcache.prompt.renderers.rendered import RenderedPrompt
from pcache.prompt.shapes.request import Request, request_of
from pcache.settings import Settings, WithSettings, validate_date  # noqa: F401 (re-exported)


@dataclass(slots=True)
class HashedPrompt:
    """A rendered prompt and the chained hashes of its full blocks."""

    rendered: RenderedPrompt
    hashes: list[bytes]
    settings: HashSettings


@dataclass(frozen=True, slots=True)
class BlockHashReport:
    """What `pcache hash` reports for one request (its JSON output, field for field)."""

    source: str
    num_tokens: int
    block_size: int
    hash_algo: str
    tokenizer: str
    block_hashes: list[str]

    @classmethod
    def of(cls, hashed: HashedPrompt) -> BlockHashReport:
        return cls(
            source=hashed.rendered.request.label,
            num_tokens=hashed.rendered.num_tokens,
            block_size=hashed.settings.block_size,
            hash_algo=hashed.settings.algo,
            tokenizer=hashed.rendered.renderer,
            block_hashes=[digest.hex() for digest in hashed.hashes],
        )


RENDER_CHUNK = 64
"""Requests rendered before their text is encoded together (`RenderStage`)."""


class RenderStage:
    """Renders a chunk of requests, then encodes the pieces none of them had before in one
    batch, on `jobs` threads (tiktoken and `tokenizers` let go of the GIL; rendering, which is
    Python, stays on the calling thread). Each request's `encode_segments` then reads its
    pieces from the cache, so the ids are those of encoding each request alone.

    With `ahead`, `start` leaves the batch encoding on a background thread while the caller
    goes on (with the chunk before: the encoding of a chunk's new text overlaps the work on
    the one before it) and `finish` collects it; the calling thread counts as one of the
    `jobs`, so the batch runs on `jobs - 1` threads, and with one job nothing runs ahead."""

    def __init__(
        self, renderer: Any, options: RenderOptions, jobs: int | None = None, ahead: bool = False
    ):
        from pcache.prompt.tokenizers.segment_cache import SegmentCachedRenderer
        from pcache.prompt.tokenizers.threads import default_jobs

        self.renderer = renderer
        self.options = options
        self.enabled = isinstance(renderer, SegmentCachedRenderer) and renderer.enabled
        jobs = jobs or default_jobs()
        self.ahead = ahead and self.enabled and jobs > 1
        if self.enabled:
            renderer.set_jobs(jobs - 1 if self.ahead else jobs)

    def prepare(self, requests: list[Request]) -> list[tuple[str, Any] | None]:
        """Each request's rendered text and deferred spans (None: left to the caller, as a
        request the template refuses, which fails again where the caller renders it)."""
        return self.finish(self.start(requests, background=False))

    def start(self, requests: list[Request], background: bool = True) -> Any:
        """Render the requests and send their new text to be encoded (in the background with
        `ahead`); `finish` gives what `prepare` gives."""
        if not self.enabled:
            return [None] * len(requests), None
        texts: list[tuple[str, Any] | None] = []
        for request in requests:
            try:
                texts.append(self.renderer.render_text_deferred(request, self.options))
            except InputError:
                texts.append(None)
        pending = self.renderer.prefetch_later(
            [text[0] for text in texts if text is not None], background and self.ahead
        )
        return texts, pending

    def finish(self, started: Any) -> list[tuple[str, Any] | None]:
        texts, pending = started
        if pending is not None:
            self.renderer.receive(pending)
        return texts

    def close(self) -> None:
        """Stop the background encoding thread, if one was started."""
        if self.enabled:
            self.renderer.close()


def iter_requests(path: str | os.PathLike[str]) -> Iterator[Request]:
    for document in iter_documents(path):
        assert isinstance(document, Document)
        yield request_of(document)


def hash_reports(items: Any, settings: Settings) -> Iterator[BlockHashReport]:
    """The block hashes of every request in `items` (paths, bodies, SDK objects), streamed."""
    from pcache.prompt.reading.held import iter_requests as requests_in

    for request in requests_in(items):
        yield BlockHashReport.of(hash_request(request, settings))


def hash_request(request: Request, settings: Settings) -> HashedPrompt:
    renderer = resolve_renderer(settings.tokenizer)
    rendered = render(request, renderer, settings.render_options())
    hash_settings = settings.hash_settings(rendered)
    return HashedPrompt(rendered, block_hashes(rendered.token_ids, hash_settings), hash_settings)


def hash_requests(requests: list[Request], settings: Settings) -> list[HashedPrompt]:
    """`hash_request` of each request, on up to `settings.jobs` threads (None: one per core);
    the first request's error is raised first, as when they are hashed in turn."""
    threads = min(settings.job_count, len(requests))
    if threads <= 1:
        return [hash_request(request, settings) for request in requests]
    resolve_renderer(settings.tokenizer)  # loaded once, before the threads share it
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(threads - 1, thread_name_prefix="pcache-render") as pool:
        later = [pool.submit(hash_request, request, settings) for request in requests[1:]]
        first = hash_request(requests[0], settings)
        return [first, *(future.result() for future in later)]
