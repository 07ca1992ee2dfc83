"""The engine's own thread: takes requests and aborts from the event loop, steps the batch.

The asyncio event loop never runs a model step. It hands commands (add, abort, reset) to
this thread through a locked inbox, and this thread hands each request's tokens back to its
`asyncio.Queue` with `call_soon_threadsafe`, once per step. Commands are applied between
steps, so a request that arrives joins the running batch at the next step (continuous
batching), and an abort frees the request's blocks before the next step is scheduled.

A fault fails requests, never the thread. A request the engine refuses or cannot add fails
alone (400, or 500 for anything but the engine's own refusal); a row whose sampling fails
fails its request alone (`sampler_guard.py`), and so does a sequence whose forward pass fails
when the engine runs it again alone (`Engine.step`); any other exception in a step fails the
requests in flight (500) and starts the engine from a fresh cache state, because the failed
step may have published the hashes of blocks whose KV it never wrote. Only a failed integrity check
(`--check-integrity`: the pool's invariants are broken) stops the engine: /health then says
503 and so does every later request.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

from pcache.errors import EngineError
from pcache.serve.api_error import ApiError, error_for_status
from pcache.serve.sampler_guard import GuardedSampler, SampledRow, TokenLogprobs

logger = logging.getLogger("pcache.serve")

SWITCH_INTERVAL_S = 0.0002
"""The interpreter's thread switch interval while the engine runs (Python's default: 5 ms).
The engine thread gives up the GIL in every tensor operation of a step and waits for it after
each; while the event loop thread parses a request, tokenizes it or writes a stream, that wait
lasts until the loop's thread is made to switch. A 0.2 ms interval bounds it: on a 4-way
`vllm bench serve` run (bench/serve_ab.py, 5 rounds against the 5 ms default) TTFT p50 was
0.95x and TPOT p50 0.91x of the default's."""


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
    logprobs: TokenLogprobs | None = None


@dataclass(frozen=True, slots=True)
class Submission:
    request_id: str
    token_ids: list[int]
    max_tokens: int
    temperature: float
    ignore_eos: bool
    cache_salt: str | None
    logprobs: int | None = None


@dataclass(slots=True)
class _Stream:
    loop: asyncio.AbstractEventLoop
    queue: asyncio.Queue
    arrival: float
    logprobs: int | None = None
    first_token: bool = False


class EngineLoop:
    """Owns an `Engine` and the thread that steps it; every method but `_run` is called from
    the event loop."""

    def __init__(
        self,
        engine: Any,
        metrics: Any,
        max_waiting: int,
        check_integrity: bool,
        kv_events: Any = None,
    ):
        """`kv_events`: a `KVEventPublisher` (opened, used from now on by this thread only)
        that gets the pool's events after every step."""
        self.engine = engine
        self.kv_events = kv_events
        self.metrics = metrics
        self.max_waiting = max_waiting
        self.check_integrity = check_integrity
        self.failure: str | None = None
        self._condition = threading.Condition()
        self._inbox: deque[tuple[str, Any]] = deque()
        self._pending_adds = 0
        self._stopping = False
        self._streams: dict[str, _Stream] = {}
        self.sampler = GuardedSampler(engine.runner.sampler)
        engine.runner.sampler = self.sampler
        self._warned_rows = False
        self._thread = threading.Thread(target=self._run, name="pcache-engine", daemon=True)
        self._switch_interval: float | None = None

    # -- event loop side -----------------------------------------------------------------------

    def start(self) -> None:
        self._switch_interval = sys.getswitchinterval()
        sys.setswitchinterval(min(self._switch_interval, SWITCH_INTERVAL_S))
        self._thread.start()

    def stop(self) -> None:
        with self._condition:
            self._stopping = True
            self._condition.notify()
        self._thread.join(timeout=30)
        if self._switch_interval is not None:
            sys.setswitchinterval(self._switch_interval)
            self._switch_interval = None

    @property
    def healthy(self) -> bool:
        return self.failure is None and self._thread.is_alive() and not self._stopping

    @property
    def num_running(self) -> int:
        return len(self.engine.scheduler.running)

    @property
    def num_waiting(self) -> int:
        return len(self.engine.scheduler.waiting) + self._pending_adds

    def submit(self, submission: Submission, queue: asyncio.Queue) -> None:
        """Queue a request; a full queue is a 429 and a stopped engine a 503."""
        loop = asyncio.get_running_loop()
        stream = _Stream(loop, queue, time.perf_counter(), submission.logprobs)
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

    def abort(self, request_id: str, reason: str = "abort") -> None:
        """Stop a request; `reason` is what the metrics count it as (a client that left is an
        abort, a stop string found in the text a stop)."""
        self._command("abort", (request_id, reason))

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
        try:
            self._loop()
        finally:
            if self.kv_events is not None:
                self.kv_events.close()

    def _loop(self) -> None:
        engine = self.engine
        publisher = self.kv_events
        while True:
            with self._condition:
                while not (self._inbox or self._stopping or engine.has_unfinished_requests()):
                    self._condition.wait()
                if self._stopping:
                    break
                commands = list(self._inbox)
                self._inbox.clear()
            deliveries: list[tuple[_Stream, Any]] = []
            try:
                if publisher is not None:
                    publisher.watch(engine.kv_manager.block_pool)
                for kind, argument in commands:
                    self._apply(kind, argument, deliveries)
                if engine.has_unfinished_requests():
                    self._step(deliveries)
                if self.check_integrity:
                    engine.check_integrity()
                if publisher is not None:
                    publisher.publish(engine.config.block_size)
            except Exception as error:  # outside a step (a broken invariant): fail all, stop
                self.failure = f"{type(error).__name__}: {error}"
                failed = error_for_status(500, f"engine failure: {self.failure}")
                deliveries.extend((stream, failed) for stream in self._streams.values())
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
            except Exception as error:  # this request's fault or the engine's: it fails alone
                self._forget(submission.request_id)
                self.metrics.finished("error")
                message = f"cannot add the request: {type(error).__name__}: {error}"
                deliveries.append((stream, error_for_status(500, message)))
                return
            self._streams[submission.request_id] = stream
        elif kind == "abort":
            request_id, reason = argument
            stream = self._streams.pop(request_id, None)
            if stream is not None:
                engine.abort_request(request_id)
                sequence = engine.release(request_id)
                self.metrics.finished(reason)
                deliveries.append((stream, TokenEvent(None, reason, _usage(sequence))))
        else:
            assert kind == "reset"
            done = engine.kv_manager.reset_prefix_cache()
            argument.get_loop().call_soon_threadsafe(_set_result, argument, done)

    def _forget(self, request_id: str) -> None:
        """Drop a request whatever state it is in (after a fault it may be half added)."""
        engine = self.engine
        sequence = engine.sequences.get(request_id)
        if sequence is not None and not sequence.is_finished:
            with contextlib.suppress(Exception):
                engine.abort_request(request_id)
        engine.sequences.pop(request_id, None)

    def _step(self, deliveries: list) -> None:
        engine = self.engine
        wanted = [s.logprobs for s in self._streams.values() if s.logprobs is not None]
        self.sampler.top_logprobs = max(wanted) if wanted else None
        self.sampler.take()
        try:
            outputs = engine.step()
        except Exception as error:
            self._fail_in_flight(error, deliveries)
            return
        now = time.perf_counter()
        stats = engine.kv_manager.make_prefix_cache_stats()
        if stats is not None:
            self.metrics.prefix_cache_queries.inc(stats.queries)
            self.metrics.prefix_cache_hits.inc(stats.hits)
        for output in outputs:
            if output.error is not None:  # this request failed alone; the engine runs on
                self._fail_one(output.request_id, SampledRow(None, output.error), deliveries)
        sampled = [o for o in outputs if o.error is None and o.new_token_id is not None]
        rows = self._rows_of(sampled)
        for output, row in zip(sampled, rows, strict=True):
            stream = self._streams.get(output.request_id)
            assert stream is not None, output.request_id
            if row.error is None and stream.logprobs is not None and row.logprobs is None:
                row = SampledRow(row.token_id, "this step's sampler gave no logprobs")
            if row.error is not None:
                self._fail_one(output.request_id, row, deliveries)
                continue
            sequence = engine.sequences[output.request_id]
            if not stream.first_token:
                stream.first_token = True
                self.metrics.time_to_first_token.observe(now - stream.arrival)
                self.metrics.prompt_tokens.inc(sequence.num_prompt_tokens)
            self.metrics.generation_tokens.inc()
            logprobs = None
            if stream.logprobs is not None:
                assert row.logprobs is not None
                wanted = row.logprobs.top[: stream.logprobs]  # the step computed the most asked
                logprobs = TokenLogprobs(row.logprobs.logprob, wanted)
            if not output.finished:
                usage = _usage(sequence)
                deliveries.append((stream, TokenEvent(output.new_token_id, None, usage, logprobs)))
                continue
            del self._streams[output.request_id]
            engine.release(output.request_id)
            stopped = not sequence.ignore_eos and output.new_token_id in sequence.eos_token_ids
            reason = "stop" if stopped else "length"
            self.metrics.finished(reason)
            event = TokenEvent(output.new_token_id, reason, _usage(sequence), logprobs)
            deliveries.append((stream, event))

    def _rows_of(self, sampled: list) -> list[SampledRow]:
        """The sampler's rows of this step, which are its sampled outputs in order; a step
        that drew its tokens some other way has none (no logprobs, no per-row faults)."""
        rows = self.sampler.take()
        tokens = [output.new_token_id for output in sampled]
        if [row.token_id for row in rows] == tokens:
            return rows
        if not self._warned_rows:
            self._warned_rows = True
            logger.warning("pcache serve: a step's tokens did not come from its sampler")
        return [SampledRow(token) for token in tokens]

    def _fail_one(self, request_id: str, row: SampledRow, deliveries: list) -> None:
        stream = self._streams.pop(request_id)
        self._forget(request_id)
        self.metrics.finished("error")
        deliveries.append((stream, error_for_status(500, str(row.error))))

    def _fail_in_flight(self, error: Exception, deliveries: list) -> None:
        """A step raised outside sampling: its requests fail, the engine starts afresh."""
        message = f"engine step failed: {type(error).__name__}: {error}"
        failed = error_for_status(500, message)
        for request_id, stream in self._streams.items():
            self._forget(request_id)
            self.metrics.finished("error")
            deliveries.append((stream, failed))
        self._streams.clear()
        for sequence in list(self.engine.sequences.values()):
            self._forget(sequence.request_id)
        self.engine.reset()  # no block the failed step published is trusted

    @staticmethod
    def _deliver(deliveries: list[tuple[_Stream, Any]]) -> None:
        by_loop: dict[asyncio.AbstractEventLoop, list] = {}
        for stream, event in deliveries:
            by_loop.setdefault(stream.loop, []).append((stream.queue, event))
        for loop, items in by_loop.items():
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody listens any more
                loop.call_soon_threadsafe(_put_all, items)


def _usage(sequence: Any) -> Usage:
    """What a request has used so far (its cached tokens are known once it is scheduled)."""
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
