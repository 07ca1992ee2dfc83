"""The engine in a process of its own: `pcache serve`'s default, as vLLM runs its engine core.

In one process the engine's thread and the event loop share the interpreter's lock: every
Python line the loop runs (parsing a request, tokenizing it, writing a stream) is a wait for
the engine between two tensor operations, and a step that overlaps arrivals runs slower than
the same step alone. Here the engine's `EngineCore` runs in a child process started with
the server; the event loop keeps only HTTP, text and streams.

The two talk over a socket pair, one pickled message at a time
(`multiprocessing.connection`). The server sends commands (add, abort, reset, stop); after
each step the child sends one message with the step's events, the metric calls the core
made, its queue lengths and the KV cache's usage, which a reader thread of the server hands
to the requests' queues and to the server's metrics. The child ends when told to stop or
when the server goes away (its end of the socket closes); a child that ends on its own
(killed, out of memory) fails the requests in flight with a 503 that says so, /health says
503, and `pcache serve` exits (`pcache.cli.serve.watch_engine`).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from pcache.engine.allocator import ask_for_huge_pages
from pcache.engine.cpus import bind_to
from pcache.errors import EngineError, UsageError
from pcache.serve.api_error import ApiError
from pcache.serve.engine_loop import (
    SHUTTING_DOWN,
    SWITCH_INTERVAL_S,
    CommandInbox,
    EngineCore,
    EngineFacts,
    Streams,
    Submission,
    SwitchInterval,
    answer_reset,
    check_admission,
)

STOP_TIMEOUT_S = 30.0
"""How long `stop` waits for the child to finish before it kills it."""
STARTUP_ERRORS = {"EngineError": EngineError, "UsageError": UsageError}
"""The errors of a child that could not start, raised again as themselves in the server."""


class _Recorder:
    """One counter or histogram of `ServerMetrics`, as the core calls it, recorded."""

    def __init__(self, calls: list, name: str) -> None:
        self.calls, self.name = calls, name

    def inc(self, amount: float = 1) -> None:
        self.calls.append((self.name, "inc", amount))

    def observe(self, value: float) -> None:
        self.calls.append((self.name, "observe", value))


class RecordedMetrics:
    """The metric calls of an `EngineCore`, kept to be sent and made on `ServerMetrics`."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str | None, Any]] = []
        for name in (
            "prefix_cache_queries",
            "prefix_cache_hits",
            "prompt_tokens",
            "generation_tokens",
            "time_to_first_token",
        ):
            setattr(self, name, _Recorder(self.calls, name))

    def finished(self, reason: str) -> None:
        self.calls.append(("finished", None, reason))

    def take(self) -> list:
        calls = self.calls[:]
        self.calls.clear()
        return calls


def replay_calls(metrics: Any, calls: list) -> None:
    """Make on `metrics` the calls a `RecordedMetrics` recorded."""
    for name, method, value in calls:
        target = getattr(metrics, name)
        (target if method is None else getattr(target, method))(value)


class EngineProcess:
    """The server's side of an engine running in a child process; the same interface as
    `EngineLoop` (every method is called from the event loop, but `launch`)."""

    def __init__(self, child: subprocess.Popen, connection: Connection, facts: EngineFacts):
        self.facts = facts
        self.metrics: Any = None
        self.max_waiting = 1
        self.streams = Streams()
        self.failure: str | None = None
        self.num_running = 0
        self.kv_usage = 0.0
        self._child = child
        self._connection = connection
        self._send_lock = threading.Lock()
        self._waiting = 0
        self._sent_adds = 0
        self._applied_adds = 0
        self._stopping = False
        self._resets: dict[int, asyncio.Future] = {}
        self._reset_ids = itertools.count()
        self._reader = threading.Thread(target=self._read, name="pcache-engine-reader", daemon=True)
        self._switch_interval = SwitchInterval()

    @classmethod
    def launch(
        cls,
        config: Any,
        check_integrity: bool,
        kv_events: str | None,
        topic: str,
        cpus: tuple[int, ...] | None = None,
    ):
        """Start the child and have it load the model (on `cpus`, `pcache.engine.cpus`, if
        given); `EngineProcess.ready` waits for it."""
        ours, theirs = socket.socketpair()
        package_root = str(Path(__file__).resolve().parents[2])
        path = os.environ.get("PYTHONPATH")
        env = dict(os.environ, PYTHONPATH=package_root + (os.pathsep + path if path else ""))
        ask_for_huge_pages(env)
        try:
            child = subprocess.Popen(
                [sys.executable, "-m", "pcache.serve.engine_process", str(theirs.fileno())],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                env=env,
            )
        finally:
            theirs.close()
        connection = Connection(ours.detach())
        with contextlib.suppress(OSError):  # a child gone already: `ready` says so
            connection.send(("start", (config, check_integrity, kv_events, topic, cpus)))
        return _Starting(child, connection)

    # -- event loop side -----------------------------------------------------------------------

    def bind(self, metrics: Any, max_waiting: int) -> None:
        """The server's metrics (the child's calls are made on them) and its queue bound."""
        self.metrics, self.max_waiting = metrics, max_waiting

    def start(self) -> None:
        self._switch_interval.shorten()
        self._reader.start()

    def stop(self) -> None:
        self._stopping = True
        with contextlib.suppress(OSError, ValueError):
            self._send(("stop", None))
        if self._reader.is_alive():
            self._reader.join(timeout=STOP_TIMEOUT_S)
        _end(self._child, self._connection)
        self.streams.fail_all(SHUTTING_DOWN)
        self._answer_resets()
        self._switch_interval.restore()

    @property
    def healthy(self) -> bool:
        return self.failure is None and self._reader.is_alive() and not self._stopping

    @property
    def num_waiting(self) -> int:
        return self._waiting + self._sent_adds - self._applied_adds

    @property
    def pid(self) -> int:
        return self._child.pid

    def submit(self, submission: Submission, queue: asyncio.Queue) -> None:
        """Queue a request; a full queue is a 429 and a stopped engine a 503."""
        arrival = time.perf_counter()  # CLOCK_MONOTONIC: the child reads the same clock
        check_admission(self, self._stopping)
        self.streams.register(submission.request_id, queue)
        self._sent_adds += 1
        try:
            self._send(("add", (submission, arrival)))
        except (OSError, ValueError):
            self.streams.deliver([(submission.request_id, self._gone())])
            return
        if self.failure is not None:  # it died while this one was sent: nobody will answer
            self.streams.deliver([(submission.request_id, self._gone())])

    def abort(self, request_id: str, reason: str = "abort") -> None:
        with contextlib.suppress(OSError, ValueError):
            self._send(("abort", (request_id, reason)))

    async def reset_prefix_cache(self) -> bool:
        future = asyncio.get_running_loop().create_future()
        token = next(self._reset_ids)
        self._resets[token] = future
        try:
            self._send(("reset", token))
        except (OSError, ValueError):
            self._resets.pop(token, None)
            return False
        return await future

    def _send(self, message: tuple) -> None:
        with self._send_lock:
            self._connection.send(message)

    def _gone(self) -> ApiError:
        """The answer of a request the engine process will never finish: 503, with why."""
        message = f"engine failure: {self.failure or 'the engine stopped'}"
        return ApiError(503, message, "service_unavailable")

    # -- reader thread -------------------------------------------------------------------------

    def _read(self) -> None:
        while True:
            try:
                kind, argument = self._connection.recv()
            except (EOFError, OSError):
                break
            if kind == "turn":
                deliveries, calls, running, waiting, applied, usage = argument
                self.num_running, self._waiting, self.kv_usage = running, waiting, usage
                self._applied_adds = applied
                replay_calls(self.metrics, calls)
                self.streams.deliver(deliveries)
            elif kind == "reset":
                token, done = argument
                future = self._resets.pop(token, None)
                if future is not None:
                    answer_reset(future, done)
            else:
                assert kind == "failed", kind
                self.failure = argument
        if not self._stopping:  # the child ended on its own
            try:
                code = self._child.wait(timeout=5)
            except subprocess.TimeoutExpired:
                code = None
            if self.failure is None:
                self.failure = f"the engine process exited (exit code {code})"
            self.streams.fail_all(self._gone())
            self._answer_resets()

    def _answer_resets(self) -> None:
        """Every reset still waiting is answered False (nothing was reset)."""
        while self._resets:
            answer_reset(self._resets.popitem()[1], False)


class _Starting:
    """A child loading its engine."""

    def __init__(self, child: subprocess.Popen, connection: Connection) -> None:
        self.child, self.connection = child, connection

    def ready(self) -> EngineProcess:
        """The engine process once its child is ready; an engine that cannot start raises
        its EngineError (or UsageError) here, and no child is left."""
        try:
            kind, argument = self.connection.recv()
        except (EOFError, OSError):
            kind, argument = "fatal", ("EngineError", "the engine process exited while starting")
        except BaseException:  # interrupted while the model loads
            self.close()
            raise
        if kind != "ready":
            _end(self.child, self.connection)
            error_type, message = argument
            raise STARTUP_ERRORS.get(error_type, EngineError)(message)
        return EngineProcess(self.child, self.connection, argument)

    def close(self) -> None:
        """Give up on the child (the server could not start): it is killed."""
        self.child.kill()
        _end(self.child, self.connection)


def _end(child: subprocess.Popen, connection: Connection) -> None:
    """Close the socket (a child still reading it stops) and reap the child, killed if it
    does not end in time."""
    connection.close()
    try:
        child.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()


# -- the child ---------------------------------------------------------------------------------


def _read_commands(connection: Connection, inbox: CommandInbox) -> None:
    """Put what the server sends into `inbox`, on a thread of its own so the socket drains
    while the engine steps; the server's end closing is a stop."""
    while True:
        try:
            kind, argument = connection.recv()
        except (EOFError, OSError):
            kind, argument = "stop", None
        if kind == "stop":
            inbox.stop()
            return
        inbox.put(kind, argument)


def _start(connection: Connection) -> EngineCore | None:
    """Load the engine the server asked for; tell the server it is ready, or why not."""
    kind, (config, check_integrity, kv_events, topic, cpus) = connection.recv()
    assert kind == "start", kind
    publisher = None
    try:
        bind_to(cpus)  # before torch starts any thread
        from pcache.engine.engine import Engine

        engine = Engine(config)
        if kv_events is not None:
            from pcache.serve.kv_events import KVEventPublisher

            publisher = KVEventPublisher(kv_events, topic)
            publisher.open()
    except (EngineError, UsageError) as error:
        connection.send(("fatal", (type(error).__name__, str(error))))
        return None
    except Exception as error:
        connection.send(("fatal", ("EngineError", f"{type(error).__name__}: {error}")))
        return None
    core = EngineCore(engine, RecordedMetrics(), check_integrity, publisher)
    connection.send(("ready", EngineFacts.of(engine)))
    return core


def _serve(connection: Connection, core: EngineCore) -> None:
    engine = core.engine
    inbox = CommandInbox()
    reader = threading.Thread(target=_read_commands, args=(connection, inbox), daemon=True)
    reader.start()

    def send_reset_answer(token: int, done: bool) -> None:
        connection.send(("reset", (token, done)))

    while True:
        commands = inbox.take(busy=engine.has_unfinished_requests())
        if commands is None:
            return
        deliveries = core.turn(commands, send_reset_answer)
        state = (core.num_running, core.num_waiting, inbox.adds_taken, engine.kv_manager.usage)
        connection.send(("turn", (deliveries, core.metrics.take(), *state)))
        if core.failure is not None:
            connection.send(("failed", core.failure))
            return


def main(argv: list[str]) -> int:
    connection = Connection(int(argv[0]))
    # Ctrl-C reaches the whole process group: the server shuts down, then stops this child
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    try:
        core = _start(connection)
        if core is None:
            return 1
        try:
            _serve(connection, core)
        finally:
            core.close()
    except (EOFError, OSError, KeyboardInterrupt):  # the server went away
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
