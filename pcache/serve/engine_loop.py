"""The engine's side of serving, and the thread that runs it beside the event loop.

`EngineCore` is what the engine's thread does, in whichever process it runs: it applies the
commands (add, abort, reset) that came in since the last step, steps the batch, and turns each
step's outputs into events of its requests, `(request_id, TokenEvent | ApiError)` in order.
`EngineLoop` runs a core in a thread of the server's own process; `EngineProcess`
(`engine_process.py`) runs one in a process of its own. Both hand every request's events to
its `asyncio.Queue` (`Streams`), so the routes see one interface.

The asyncio event loop never runs a model step. Commands are applied between steps, so a
request that arrives joins the running batch at the next step (continuous batching), and an
abort frees the request's blocks before the next step is scheduled.

A fault fails requests, never the engine's thread. A request the engine refuses or cannot add
fails alone (400, or 500 for anything but the engine's own refusal); a row whose sampling
fails fails its request alone (`sampler_guard.py`), and so does a sequence whose forward pass
fails when the engine runs it again alone (`Engine.step`); any other exception in a step fails
the requests in flight (500) and starts the engine from a fresh cache state, because the
failed step may have published the hashes of blocks whose KV it never wrote. Only a failed
integrity check (`--check-integrity`: the pool's invariants are broken) stops the engine:
/health then says 503 and so does every later request.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pcache.engine.cpus import bind_to
from pcache.engine.limits import RequestLimits
from pcache.errors import EngineError
from pcache.serve.api_error import ApiError, error_for_status
from pcache.serve.sampler_guard import GuardedSampler, SampledRow, TokenLogprobs

logger = logging.getLogger("pcache.serve")

SWITCH_INTERVAL_S = 0.0002
"""The interpreter's thread switch interval while the engine runs (Python's default: 5 ms).
The engine thread gives up the GIL in every tensor operation of a step and waits for it after
each; while another thread of its process holds it (the event loop parsing a request,
tokenizing it or writing a stream; the engine process's command reader), that wait lasts
until the other thread is made to switch. A 0.2 ms interval bounds it: on a 4-way
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


@dataclass(frozen=True, slots=True)
class EngineFacts:
    """What the routes and the metrics need to know of the engine, wherever it runs."""

    limits: RequestLimits
    dtype_name: str
    hash_algo: str

    @classmethod
    def of(cls, engine: Any) -> EngineFacts:
        return cls(engine.limits, engine.config.torch_dtype_name, engine.config.hash_algo)


@dataclass(slots=True)
class _Request:
    """What the core keeps of a request it runs: when it arrived (TTFT counts from then),
    how many logprobs it wants, and whether its first token went out."""

    arrival: float
    logprobs: int | None = None
    first_token: bool = False


Delivery = tuple[str, Any]
"""A request id and its next event: a `TokenEvent`, or the `ApiError` that ends it."""


def is_last(event: Any) -> bool:
    """True for the event that ends a request's stream."""
    return isinstance(event, ApiError) or event.finish_reason is not None


class EngineCore:
    """Steps an `Engine` for a server and turns its outputs into events; one thread uses it.

    `metrics` takes the calls of `ServerMetrics` (its counters' `inc`, the TTFT histogram's
    `observe`, `finished(reason)`); `kv_events`, a `KVEventPublisher` opened in this thread's
    process, gets the pool's events after every step."""

    def __init__(self, engine: Any, metrics: Any, check_integrity: bool, kv_events: Any = None):
        self.engine = engine
        self.metrics = metrics
        self.check_integrity = check_integrity
        self.kv_events = kv_events
        self.failure: str | None = None
        self.requests: dict[str, _Request] = {}
        self.sampler = GuardedSampler(engine.runner.sampler)
        engine.runner.sampler = self.sampler
        self._warned_rows = False

    def turn(self, commands: list[tuple[str, Any]], on_reset: Callable[[Any, bool], None]):
        """Apply `commands` in order, then step once if any request is unfinished; returns
        the deliveries. `("add", (submission, arrival))`, `("abort", (request_id, reason))`,
        `("reset", token)`: a reset is answered with `on_reset(token, done)`. A fault outside
        a step (a broken invariant) sets `failure` and fails every request."""
        engine = self.engine
        publisher = self.kv_events
        deliveries: list[Delivery] = []
        try:
            if publisher is not None:
                publisher.watch(engine.kv_manager.block_pool)
            for kind, argument in commands:
                if kind == "reset":
                    on_reset(argument, engine.kv_manager.reset_prefix_cache())
                else:
                    self._apply(kind, argument, deliveries)
            if engine.has_unfinished_requests():
                self._step(deliveries)
            if self.check_integrity:
                engine.check_integrity()
            if publisher is not None:
                publisher.publish(engine.config.block_size)
        except Exception as error:
            self.failure = f"{type(error).__name__}: {error}"
            failed = error_for_status(500, f"engine failure: {self.failure}")
            deliveries.extend((request_id, failed) for request_id in self.requests)
            self.requests.clear()
        return deliveries

    def close(self) -> None:
        if self.kv_events is not None:
            self.kv_events.close()

    @property
    def num_running(self) -> int:
        return len(self.engine.scheduler.running)

    @property
    def num_waiting(self) -> int:
        return len(self.engine.scheduler.waiting)

    def _apply(self, kind: str, argument: Any, deliveries: list[Delivery]) -> None:
        engine = self.engine
        if kind == "add":
            submission, arrival = argument
            request_id = submission.request_id
            try:
                engine.add_request(
                    submission.token_ids,
                    submission.max_tokens,
                    submission.cache_salt,
                    temperature=submission.temperature,
                    ignore_eos=submission.ignore_eos,
                    request_id=request_id,
                )
            except EngineError as error:
                deliveries.append((request_id, ApiError(400, str(error))))
                return
            except Exception as error:  # this request's fault or the engine's: it fails alone
                self._forget(request_id)
                self.metrics.finished("error")
                message = f"cannot add the request: {type(error).__name__}: {error}"
                deliveries.append((request_id, error_for_status(500, message)))
                return
            self.requests[request_id] = _Request(arrival, submission.logprobs)
        else:
            assert kind == "abort", kind
            request_id, reason = argument
            if self.requests.pop(request_id, None) is not None:
                engine.abort_request(request_id)
                sequence = engine.release(request_id)
                self.metrics.finished(reason)
                deliveries.append((request_id, TokenEvent(None, reason, _usage(sequence))))

    def _forget(self, request_id: str) -> None:
        """Drop a request whatever state it is in (after a fault it may be half added)."""
        engine = self.engine
        sequence = engine.sequences.get(request_id)
        if sequence is not None and not sequence.is_finished:
            with contextlib.suppress(Exception):
                engine.abort_request(request_id)
        engine.sequences.pop(request_id, None)

    def _step(self, deliveries: list[Delivery]) -> None:
        engine = self.engine
        wanted = [r.logprobs for r in self.requests.values() if r.logprobs is not None]
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
            request = self.requests.get(output.request_id)
            assert request is not None, output.request_id
            if row.error is None and request.logprobs is not None and row.logprobs is None:
                row = SampledRow(row.token_id, "this step's sampler gave no logprobs")
            if row.error is not None:
                self._fail_one(output.request_id, row, deliveries)
                continue
            sequence = engine.sequences[output.request_id]
            if not request.first_token:
                request.first_token = True
                self.metrics.time_to_first_token.observe(now - request.arrival)
                self.metrics.prompt_tokens.inc(sequence.num_prompt_tokens)
            self.metrics.generation_tokens.inc()
            logprobs = None
            if request.logprobs is not None:
                assert row.logprobs is not None
                wanted = row.logprobs.top[: request.logprobs]  # the step computed the most asked
                logprobs = TokenLogprobs(row.logprobs.logprob, wanted)
            if not output.finished:
                event = TokenEvent(output.new_token_id, None, _usage(sequence), logprobs)
                deliveries.append((output.request_id, event))
                continue
            del self.requests[output.request_id]
            engine.release(output.request_id)
            stopped = not sequence.ignore_eos and output.new_token_id in sequence.eos_token_ids
            reason = "stop" if stopped else "length"
            self.metrics.finished(reason)
            event = TokenEvent(output.new_token_id, reason, _usage(sequence), logprobs)
            deliveries.append((output.request_id, event))

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

    def _fail_one(self, request_id: str, row: SampledRow, deliveries: list[Delivery]) -> None:
        del self.requests[request_id]
        self._forget(request_id)
        self.metrics.finished("error")
        deliveries.append((request_id, error_for_status(500, str(row.error))))

    def _fail_in_flight(self, error: Exception, deliveries: list[Delivery]) -> None:
        """A step raised outside sampling: its requests fail, the engine starts afresh."""
        message = f"engine step failed: {type(error).__name__}: {error}"
        failed = error_for_status(500, message)
        for request_id in self.requests:
            self._forget(request_id)
            self.metrics.finished("error")
            deliveries.append((request_id, failed))
        self.requests.clear()
        for sequence in list(self.engine.sequences.values()):
            self._forget(sequence.request_id)
        self.engine.reset()  # no block the failed step published is trusted


class Streams:
    """The event loop's side of the requests in flight: each request's queue and its loop.

    A request is registered when it is submitted and forgotten when its last event is handed
    over; `deliver` may be called from any thread."""

    def __init__(self) -> None:
        self._queues: dict[str, tuple[asyncio.AbstractEventLoop, asyncio.Queue]] = {}

    def register(self, request_id: str, queue: asyncio.Queue) -> None:
        self._queues[request_id] = (asyncio.get_running_loop(), queue)

    def deliver(self, deliveries: list[Delivery]) -> None:
        by_loop: dict[asyncio.AbstractEventLoop, list] = {}
        for request_id, event in deliveries:
            target = (
                self._queues.pop(request_id) if is_last(event) else self._queues.get(request_id)
            )
            if target is not None:
                by_loop.setdefault(target[0], []).append((target[1], event))
        for loop, items in by_loop.items():
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody listens any more
                loop.call_soon_threadsafe(_put_all, items)

    def fail_all(self, error: ApiError) -> None:
        """End every stream still open with `error`."""
        self.deliver([(request_id, error) for request_id in list(self._queues)])

    def __len__(self) -> int:
        return len(self._queues)


class CommandInbox:
    """The commands for an engine's thread (add, abort, reset), in order, under one lock."""

    def __init__(self) -> None:
        self.condition = threading.Condition()
        self.commands: deque[tuple[str, Any]] = deque()
        self.stopping = False
        self.adds_put = 0
        self.adds_taken = 0

    def put(self, kind: str, argument: Any, admit: Callable[[], None] | None = None) -> None:
        """Queue a command; `admit` (called under the lock) may refuse it by raising."""
        with self.condition:
            if admit is not None:
                admit()
            self.commands.append((kind, argument))
            self.adds_put += kind == "add"
            self.condition.notify()

    def stop(self) -> None:
        """Stop taking commands (`take` gives None from now on)."""
        with self.condition:
            self.stopping = True
            self.condition.notify()

    def drain(self) -> list[tuple[str, Any]]:
        """The commands never taken."""
        with self.condition:
            left = list(self.commands)
            self.commands.clear()
        return left

    @property
    def pending_adds(self) -> int:
        return self.adds_put - self.adds_taken

    def take(self, busy: bool) -> list[tuple[str, Any]] | None:
        """The commands since the last call (waiting for one unless `busy`); None once
        stopping."""
        with self.condition:
            if not busy:
                self.condition.wait_for(lambda: self.commands or self.stopping)
            if self.stopping:
                return None
            commands = list(self.commands)
            self.commands.clear()
            self.adds_taken += sum(kind == "add" for kind, _ in commands)
            return commands


class SwitchInterval:
    """The interpreter's thread switch interval, shortened to `SWITCH_INTERVAL_S` while an
    engine's host runs and given back when it stops."""

    def __init__(self) -> None:
        self._saved: float | None = None

    def shorten(self) -> None:
        self._saved = sys.getswitchinterval()
        sys.setswitchinterval(min(self._saved, SWITCH_INTERVAL_S))

    def restore(self) -> None:
        if self._saved is not None:
            sys.setswitchinterval(self._saved)
            self._saved = None


class EngineLoop:
    """An `EngineCore` in a thread of the server's process; every method but `_run` is called
    from the event loop."""

    def __init__(
        self,
        engine: Any,
        check_integrity: bool,
        kv_events: Any = None,
        cpus: tuple[int, ...] | None = None,
    ):
        """`kv_events`: a `KVEventPublisher` (opened, used from now on by this thread only);
        `cpus`: where the engine's thread runs (`pcache.engine.cpus`)."""
        self.engine = engine
        self.cpus = cpus
        self.facts = EngineFacts.of(engine)
        self.core = EngineCore(engine, None, check_integrity, kv_events)
        self.metrics: Any = None
        self.max_waiting = 1
        self.inbox = CommandInbox()
        self.streams = Streams()
        self._thread = threading.Thread(target=self._run, name="pcache-engine", daemon=True)
        self._switch_interval = SwitchInterval()

    # -- event loop side -----------------------------------------------------------------------

    def bind(self, metrics: Any, max_waiting: int) -> None:
        """The server's metrics (the core counts on them) and its queue bound."""
        self.metrics = self.core.metrics = metrics
        self.max_waiting = max_waiting

    def start(self) -> None:
        self._switch_interval.shorten()
        self._thread.start()

    def stop(self) -> None:
        self.inbox.stop()
        self._thread.join(timeout=30)
        self._switch_interval.restore()

    @property
    def sampler(self) -> GuardedSampler:
        return self.core.sampler

    @property
    def failure(self) -> str | None:
        return self.core.failure

    @property
    def healthy(self) -> bool:
        return self.failure is None and self._thread.is_alive() and not self.inbox.stopping

    @property
    def num_running(self) -> int:
        return self.core.num_running

    @property
    def num_waiting(self) -> int:
        return self.core.num_waiting + self.inbox.pending_adds

    @property
    def kv_usage(self) -> float:
        return self.engine.kv_manager.usage

    def submit(self, submission: Submission, queue: asyncio.Queue) -> None:
        """Queue a request; a full queue is a 429 and a stopped engine a 503."""
        arrival = time.perf_counter()

        def admit() -> None:
            check_admission(self, self.inbox.stopping)
            self.streams.register(submission.request_id, queue)

        self.inbox.put("add", (submission, arrival), admit)

    def abort(self, request_id: str, reason: str = "abort") -> None:
        """Stop a request; `reason` is what the metrics count it as (a client that left is an
        abort, a stop string found in the text a stop)."""
        self.inbox.put("abort", (request_id, reason))

    async def reset_prefix_cache(self) -> bool:
        future = asyncio.get_running_loop().create_future()
        self.inbox.put("reset", future)
        return await future

    # -- engine thread -------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            bind_to(self.cpus)
            self._loop()
        finally:
            self.core.close()

    def _loop(self) -> None:
        core = self.core
        while True:
            commands = self.inbox.take(busy=core.engine.has_unfinished_requests())
            if commands is None:
                break
            self.streams.deliver(core.turn(commands, answer_reset))
            if core.failure is not None:
                break
        self.inbox.stop()
        for kind, argument in self.inbox.drain():
            if kind == "reset":
                answer_reset(argument, False)
        self.streams.fail_all(SHUTTING_DOWN)


SHUTTING_DOWN = ApiError(503, "the server is shutting down", "service_unavailable")


def check_admission(host: Any, stopping: bool) -> None:
    """Refuse a request as `submit` must: 503 when the engine is not running, 429 when
    `host.max_waiting` requests are already waiting."""
    if host.failure is not None:
        message = f"the engine is not running (engine failure: {host.failure})"
        raise ApiError(503, message, "service_unavailable")
    if stopping:
        raise ApiError(503, "the engine is not running", "service_unavailable")
    if host.num_waiting >= host.max_waiting:
        host.metrics.rejected.inc()
        raise ApiError(
            429,
            f"too many requests waiting ({host.max_waiting}); retry later",
            "rate_limit_exceeded",
        )


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


def answer_reset(future: asyncio.Future, done: bool) -> None:
    """Answer a reset's future from any thread."""
    with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits any more
        future.get_loop().call_soon_threadsafe(_set_result, future, done)


def _set_result(future: asyncio.Future, value: bool) -> None:
    if not future.done():
        future.set_result(value)
