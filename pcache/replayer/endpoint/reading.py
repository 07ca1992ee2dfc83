"""Everything read from a server, bounded: a body, or a stream's lines, decoded as it comes.

The bytes are read raw and decompressed here (gzip or deflate, the encodings the client
accepts), a piece of at most `PIECE_BYTES` at a time, so a compressed bomb is cut off at the
limit instead of being inflated whole. A body past its limit, one line past `MAX_LINE_BYTES`
or a stream past `MAX_STREAM_BYTES` raises `ResponseTooLarge`, which fails that one request
with its reason. Lines end at `\\n` (a `\\r` before it is dropped).
"""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterator, Iterator
from typing import Any

ACCEPT_ENCODING = "gzip, deflate"
PIECE_BYTES = 1 << 16
MAX_LINE_BYTES = 4 << 20
"""One server-sent event line: a chunk of a few tokens, or usage, is far below this."""
MAX_STREAM_BYTES = 256 << 20
"""A whole stream, decompressed (streams are read line by line, never held whole)."""
MAX_ERROR_BYTES = 64 << 10
"""Of an error body, only this much is read (it is quoted in 200 characters)."""
MAX_SIDE_BYTES = 64 << 20
"""A side request's body: /v1/models, /metrics, /tokenize, server info."""


class ResponseTooLarge(Exception):
    """A body or a line went past its limit; the message says which."""


class UnsupportedEncoding(Exception):
    """The server compressed its answer with an encoding the client did not offer."""


def _size(limit: int) -> str:
    return f"{limit >> 20} MiB" if limit >= 1 << 20 else f"{limit >> 10} KiB"


class _Decoder:
    """Content-Encoding undone a piece at a time (identity, gzip, deflate)."""

    def __init__(self, encoding: str) -> None:
        names = [name.strip().lower() for name in encoding.split(",") if name.strip()]
        names = [name for name in names if name != "identity"]
        if len(names) > 1 or (names and names[0] not in ("gzip", "x-gzip", "deflate")):
            raise UnsupportedEncoding(f"the server sent content-encoding {encoding!r}")
        self.name = names[0] if names else None
        self.wbits = zlib.MAX_WBITS | 16 if self.name in ("gzip", "x-gzip") else zlib.MAX_WBITS
        self.inflater: Any = zlib.decompressobj(self.wbits) if self.name else None
        self.started = False

    def feed(self, data: bytes) -> Iterator[bytes]:
        if self.inflater is None:
            yield data
            return
        while data:
            try:
                piece = self.inflater.decompress(data, PIECE_BYTES)
            except zlib.error as error:
                if self.name == "deflate" and not self.started:  # raw deflate, no zlib header
                    self.inflater = zlib.decompressobj(-zlib.MAX_WBITS)
                    self.started = True
                    continue
                raise UnsupportedEncoding(f"the {self.name} body is corrupt ({error})") from None
            self.started = True
            data = self.inflater.unconsumed_tail
            if piece:
                yield piece
            elif self.inflater.eof:
                return


async def _pieces(response: Any) -> AsyncIterator[bytes]:
    if response.is_stream_consumed:  # made in memory, already read (httpx's MockTransport)
        content = response.content
        for start in range(0, len(content), PIECE_BYTES):
            yield content[start : start + PIECE_BYTES]
        return
    decoder = _Decoder(response.headers.get("content-encoding", ""))
    async for raw in response.aiter_raw():
        for piece in decoder.feed(raw):
            yield piece


async def read_body(response: Any, limit: int, truncate: bool = False) -> bytes:
    """The decoded body, at most `limit` bytes: past it, `ResponseTooLarge` (or, with
    `truncate`, its first `limit` bytes: an error body is only quoted)."""
    parts: list[bytes] = []
    size = 0
    async for piece in _pieces(response):
        size += len(piece)
        if size > limit:
            if truncate:
                parts.append(piece[: limit - (size - len(piece))])
                break
            raise ResponseTooLarge(f"the body is larger than {_size(limit)}")
        parts.append(piece)
    return b"".join(parts)


async def iter_lines(
    response: Any, max_line: int = MAX_LINE_BYTES, max_total: int = MAX_STREAM_BYTES
) -> AsyncIterator[bytes]:
    """The body's non-blank lines as they arrive, without their ends; bounded per line and
    in total. (Blank lines only separate server-sent events: a flood of them costs little.)"""
    pending = bytearray()
    total = 0
    async for piece in _pieces(response):
        total += len(piece)
        if total > max_total:
            raise ResponseTooLarge(f"the stream is larger than {_size(max_total)}")
        lines = piece.split(b"\n")
        if len(lines) == 1:
            pending += piece
        else:
            lines[0] = bytes(pending) + lines[0]
            pending = bytearray(lines.pop())
            for line in lines:
                if len(line) > max_line:
                    raise ResponseTooLarge(f"a stream line is longer than {_size(max_line)}")
                line = line.removesuffix(b"\r")
                if line:
                    yield line
        if len(pending) > max_line:
            raise ResponseTooLarge(f"a stream line is longer than {_size(max_line)}")
    last = bytes(pending).removesuffix(b"\r")
    if last:
        yield last
