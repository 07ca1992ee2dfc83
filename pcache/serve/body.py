"""Request bodies read within bounds: a size limit and a deadline.

A `Content-Length` over the limit is answered 413 before a byte of the body is read; a body
without one (chunked) is read as it arrives and refused as soon as it passes the limit, so
the server never holds more than the limit plus one chunk (uvicorn pauses the socket while
the application has not taken the chunk it has). A body that has not arrived within the
deadline (a client trickling bytes) is answered 408.
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson

from pcache.serve.api_error import ApiError, bad_request

MAX_BODY_BYTES = 32 * 1024 * 1024
BODY_TIMEOUT_S = 30.0


def _too_large(limit: int) -> ApiError:
    return ApiError(413, f"the request body exceeds {limit} bytes")


def declared_length(headers: Any, limit: int) -> int | None:
    value = headers.get("content-length")
    if value is None:
        return None
    if not value.isascii() or not value.isdigit():
        raise bad_request("the Content-Length header is not a number")
    if len(value) > 20 or int(value) > limit:
        raise _too_large(limit)
    return int(value)


async def read_body(request: Any, limit: int, timeout: float) -> bytes:
    declared_length(request.headers, limit)
    chunks: list[bytes] = []
    size = 0

    async def receive_all() -> None:
        nonlocal size
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise _too_large(limit)
            chunks.append(chunk)

    try:
        await asyncio.wait_for(receive_all(), timeout)
    except TimeoutError:
        raise ApiError(408, f"the request body did not arrive within {timeout:g} s") from None
    return b"".join(chunks)


async def read_json(request: Any, limit: int = MAX_BODY_BYTES, timeout: float = BODY_TIMEOUT_S):
    body = await read_body(request, limit, timeout)
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as error:
        raise bad_request(f"the request body is not valid JSON: {error}") from None
