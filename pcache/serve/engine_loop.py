"""The engine's own thread: takes requests and aborts from the event loop, steps the batch.

The asyncio event loop never runs a model step. It hands commands (add, abort, reset) to
this thread through a locked inbox, and this thread hands each request's tokens back to its
`asyncio.Queue` with `call_soon_threadsafe`, once per step. Commands are applied between
steps, so a request that arrives joins the running batch at the next step (continuous
batching), and an abort frees the request's blocks before the next step is scheduled.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

from pcache.errors import EngineError
from pcache.serve.protocol import ApiError


@dataclass(frozen=True, slots=True)
class Usage:
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int


@dataclass(frozen=True, slots=True)
class TokenEvent:
    """One new token of a request; the last event also carries the finish reason and usage."""

    token_id: int | None
    finish_reason: str | None = None
    usage: Usage | None = None


@dataclass(frozen=True, slots=True)
class Submission:
    request_id: str
    token_ids: list[int]
    max_tokens: int
    temperature: float
    ignore_eos: bool
    cache_salt: str | None


@dataclass(slots=True)
class _Stream:
    loop: asyncio.AbstractEventLoop
    queue: asyncio.Queue
    arrival: float
    first_token: bool = False


class EngineLoop:
    """Owns an `Engine` and the thread that steps it; every method but `_run` is called from
    the event loop."""

    def __init__(self, engine: Any, metrics: Any, max_waiting: int, check_integrity: bool):
        self.engine = engine
        self.metrics = metrics
        self.max_waiting = max_waiting
        self.check_integrity = check_integrity
        self.failure: str | None = None
        self._condition = threading.Condition()
        self._inbox: deque[tuple[str, Any]] = deque()
        self._pending_adds = 0
        self._stopping = False
        self._streams: dict[str, _Stream] = {}
        self._thread = threading.Thread(target=self._run, name="pcache-engine", daemon=True)

    # -- event loop side -----------------------------------------------------------------------

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        with self._condition:
            self._stopping = True
            self._condition.notify()
        self._thread.join(timeout=30)

    @property
    def num_running(self) -> int:
        return len(self.engine.scheduler.running)

    @property
    def num_waiting(self) -> int:
        return len(self.engine.scheduler.waiting) + self._pending_adds

    def submit(self, submission: Submission, queue: asyncio.Queue) -> None:
        """Queue a request; a full queue is a 429 and a stopped engine a 503."""
        stream = _Stream(asyncio.get_running_loop(), queue, time.perf_counter())
        with self._condition:
            if self.failure is not None or self._stopping:
                raise ApiError(503, "the engine is not running", "service_unavailable")
            if self.num_waiting >= self.max_waiting:
                self.metrics.rejected.inc()
                raise ApiError(
                    429,
                    f"too many requests waiting ({self.max_waiting}); retry later",
                    "rate_limit_exceeded",
                )
            self._inbox.append(("add", (submission, stream)))
            self._pending_adds += 1
            self._condition.notify()

    def abort(self, request_id: str) -> None:
        self._command("abort", request_id)

    async def reset_prefix_cache(self) -> bool:
        future = asyncio.get_running_loop().create_future()
        self._command("reset", future)
        return await future

    def _command(self, kind: str, argument: Any) -> None:
        with self._condition:
            self._inbox.append((kind, argument))
            self._condition.notify()

    # -- engine thread -------------------------------------------------------------------------

    def _run(self) -> None:
        engine = self.engine
        while True:
            with self._condition:
                while not (self._inbox or self._stopping or engine.has_unfinished_requests()):
                    self._condition.wait()
                if self._stopping:
                    break
                commands = list(self._inbox)
                self._inbox.clear()
            try:
                deliveries: list[tuple[_Stream, Any]] = []
                for kind, argument in commands:
                    self._apply(kind, argument, deliveries)
                if engine.has_unfinished_requests():
                    self._step(deliveries)
                if self.check_integrity:
                    engine.check_integrity()
            except Exception as error:  # a bug in the engine: fail every request, stay down
                self.failure = f"{type(error).__name__}: {error}"
                failed = ApiError(500, f"engine failure: {self.failure}", "internal_error")
                deliveries = [(stream, failed) for stream in self._streams.values()]
                self._streams.clear()
                self._deliver(deliveries)
                break
            self._deliver(deliveries)
        self._fail_remaining()

    def _fail_remaining(self) -> None:
        with self._condition:
            self._stopping = True
            commands = list(self._inbox)
            self._inbox.clear()
        stopped = ApiError(503, "the server is shutting down", "service_unavailable")
        deliveries = [(stream, stopped) for stream in self._streams.values()]
        for kind, argument in commands:
            if kind == "add":
                deliveries.append((argument[1], stopped))
            elif kind == "reset":
                argument.get_loop().call_soon_threadsafe(_set_result, argument, False)
        self._deliver(deliveries)

    def _apply(self, kind: str, argument: Any, deliveries: list) -> None:
        engine = self.engine
        if kind == "add":
            submission, stream = argument
            with self._condition:
                self._pending_adds -= 1
            try:
                engine.add_request(
                    submission.token_ids,
                    submission.max_tokens,
                    submission.cache_salt,
                    temperature=submission.temperature,
                    ignore_eos=submission.ignore_eos,
                    request_id=submission.request_id,
                )
            except EngineError as error:
                deliveries.append((stream, ApiError(400, str(error))))
                return
            self._streams[submission.request_id] = stream
        elif kind == "abort":
            stream = self._streams.pop(argument, None)
            if stream is not None:
                engine.abort_request(argument)
                sequence = engine.release(argument)
                self.metrics.finished("abort")
                deliveries.append((stream, TokenEvent(None, "abort", _usage(sequence))))
        else:
            assert kind == "reset"
            done = engine.kv_manager.reset_prefix_cache()
            argument.get_loop().call_soon_threadsafe(_set_result, argument, done)

    def _step(self, deliveries: list) -> None:
        engine = self.engine
        outputs = engine.step()
        now = time.perf_counter()
        stats = engine.kv_manager.make_prefix_cache_stats()
        if stats is not None:
            self.metrics.prefix_cache_queries.inc(stats.queries)
            self.metrics.prefix_cache_hits.inc(stats.hits)
        for output in outputs:
            stream = self._streams.get(output.request_id)
            assert stream is not None, output.request_id
            if output.error is not None:  # this request failed; the engine and the rest run on
                del self._streams[output.request_id]
                engine.release(output.request_id)
                failed = ApiError(500, f"the request failed: {output.error}", "internal_error")
                deliveries.append((stream, failed))
                continue
            if output.new_token_id is None:
                continue
            sequence = engine.sequences[output.request_id]
            if not stream.first_token:
                stream.first_token = True
                self.metrics.time_to_first_token.observe(now - stream.arrival)
                self.metrics.prompt_tokens.inc(sequence.num_prompt_tokens)
            self.metrics.generation_tokens.inc()
            if not output.finished:
                deliveries.append((stream, TokenEvent(output.new_token_id)))
                continue
            del self._streams[output.request_id]
            engine.release(output.request_id)
            stopped = not sequence.ignore_eos and output.new_token_id in sequence.eos_token_ids
            reason = "stop" if stopped else "length"
            self.metrics.finished(reason)
            deliveries.append((stream, TokenEvent(output.new_token_id, reason, _usage(sequence))))

    @staticmethod
    def _deliver(deliveries: list[tuple[_Stream, Any]]) -> None:
        by_loop: dict[asyncio.AbstractEventLoop, list] = {}
        for stream, event in deliveries:
            by_loop.setdefault(stream.loop, []).append((stream.queue, event))
        for loop, items in by_loop.items():
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody listens any more
                loop.call_soon_threadsafe(_put_all, items)


def _usage(sequence: Any) -> Usage:
    return Usage(
        sequence.num_prompt_tokens,
        len(sequence.output_token_ids),
        sequence.num_cached_tokens or 0,
    )


def _put_all(items: list[tuple[asyncio.Queue, Any]]) -> None:
    for queue, event in items:
        queue.put_nowait(event)


def _set_result(future: asyncio.Future, value: bool) -> None:
    if not future.done():
        future.set_result(value)
