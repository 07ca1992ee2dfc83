"""Work that stops when the client goes away: a task races a listener for `http.disconnect`.

The listener awaits the ASGI `receive` channel (after the body was read, its next message is
the disconnect), so nothing polls; vLLM's `with_cancellation` does the same for the same
reason (`Request.is_disconnected()` is a poll and misses disconnects behind middleware).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


async def wait_for_disconnect(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


async def unless_disconnected(receive: Receive, work: Awaitable[Any]) -> tuple[bool, Any]:
    """(True, result) when `work` finished first; (False, None) when the client left first
    (`work` is cancelled then)."""
    outcome: list[Any] = []

    async with anyio.create_task_group() as group:

        async def run() -> None:
            outcome.append(await work)
            group.cancel_scope.cancel()

        async def listen() -> None:
            await wait_for_disconnect(receive)
            group.cancel_scope.cancel()

        group.start_soon(run)
        group.start_soon(listen)
    return (True, outcome[0]) if outcome else (False, None)


class EventStream:
    """A `text/event-stream` response whose producer is cancelled when the client leaves."""

    media_type = "text/event-stream"

    def __init__(self, events: AsyncIterator[bytes]) -> None:
        self.events = events

    async def __call__(self, scope: dict, receive: Receive, send: Send) -> None:
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", b"text/event-stream; charset=utf-8"),
                    (b"cache-control", b"no-cache"),
                ],
            }
        )

        async def produce() -> None:
            try:
                async for chunk in self.events:
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
                await send({"type": "http.response.body", "body": b"", "more_body": False})
            except OSError:  # the socket broke while sending: the client is gone as well
                pass

        try:
            await unless_disconnected(receive, produce())
        finally:
            await self.events.aclose()  # type: ignore[attr-defined]
