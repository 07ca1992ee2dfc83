"""`Forked(function, *arguments)`: a pure computation over what this process holds, run in a
forked child while this process goes on with other work; `Standby(prepare)`: a child forked
early, while this process is small, that prepares (imports) at once and later computes one
call sent to it.

A `Forked` child sees this process's memory as the fork left it (no copy of the inputs is
sent) and sends back the pickled result. Pages of that memory the child or this process
writes to afterwards (reference counts included) are copied then: a child that walks a large
heap pays for it, which a `Standby` forked before the heap grew does not.

`result()` waits for the child; where no child could be forked, or the child failed or went
away, it computes the result here, so that the caller gets the same value either way. Only on
Linux (macOS's system libraries are not safe to use in a forked child; Windows does not fork)
and with more than one core to run on (`jobs`).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable
from typing import Any


def can_fork(jobs: int) -> bool:
    """Whether a forked child may run beside this process: more than one job, and Linux."""
    return jobs > 1 and sys.platform.startswith("linux")


def fork_child(target: Callable[..., None], *arguments: Any, name: str | None = None):
    """A forked child running `target(*arguments, sending)` and the receiving end of its pipe;
    None where no process could be had (limits, memory): the caller then works alone."""
    import multiprocessing

    context = multiprocessing.get_context("fork")
    receiving, sending = context.Pipe(duplex=False)
    try:
        process = context.Process(target=target, args=(*arguments, sending), name=name, daemon=True)
        process.start()
    except OSError:
        receiving.close()
        return None
    finally:
        sending.close()
    return process, receiving


JOIN_TIMEOUT_S = 5.0
"""How long a child that has sent everything may take to exit before it is killed."""


def end_child(process: Any) -> None:
    """Wait for a child to exit (killed after `JOIN_TIMEOUT_S`)."""
    process.join(JOIN_TIMEOUT_S)
    if process.is_alive():
        process.kill()
        process.join()


class Forked:
    """`function(*arguments)`, computed in a forked child when that can run beside this
    process."""

    def __init__(self, function: Callable[..., Any], *arguments: Any, jobs: int = 1):
        self.function = function
        self.arguments = arguments
        started = fork_child(self._child) if can_fork(jobs) else None
        self.process, self.connection = started or (None, None)

    def _child(self, connection: Any) -> None:
        try:
            connection.send(("done", self.function(*self.arguments)))
        except BaseException:  # whatever it was, the parent computes the result itself
            pass
        finally:
            connection.close()

    @property
    def in_child(self) -> bool:
        """Whether a child is computing the result."""
        return self.process is not None

    def result(self) -> Any:
        """The result: the child's, else computed here."""
        if self.process is None:
            return self.function(*self.arguments)
        try:
            message = self.connection.recv()
        except (EOFError, OSError):
            message = None
        finally:
            self.connection.close()
            end_child(self.process)
            self.process = None
        if isinstance(message, tuple) and message[0] == "done":
            return message[1]
        return self.function(*self.arguments)


class Standby:
    """A child forked now that runs `prepare()` at once, then waits for one call:
    `call(function, *arguments)` sends it (pickled, by reference for the function) and
    `result()` returns `function(*arguments)`, computed there, or here where no child ran,
    it failed or went away, or the call could not be sent. Close it (`with`) when done."""

    def __init__(self, prepare: Callable[[], None], jobs: int = 1):
        import multiprocessing

        self.prepare = prepare
        self.call_made: tuple[Callable[..., Any], tuple[Any, ...]] | None = None
        self.process = self.connection = self.calls = None
        if not can_fork(jobs):
            return
        receiving, self.calls = multiprocessing.get_context("fork").Pipe(duplex=False)
        started = fork_child(self._child, receiving)
        receiving.close()
        if started is None:
            self.calls.close()
            self.calls = None
            return
        self.process, self.connection = started

    def _child(self, receiving: Any, sending: Any) -> None:
        try:
            self.calls.close()  # (this process's end: the parent's going away ends recv)
            self.prepare()
            function, arguments = receiving.recv()
            sending.send(("done", function(*arguments)))
        except BaseException:  # whatever it was, the parent computes the result itself
            pass
        finally:
            receiving.close()
            sending.close()

    @property
    def in_child(self) -> bool:
        """Whether a child is waiting for the call or computing it."""
        return self.process is not None

    def call(self, function: Callable[..., Any], *arguments: Any) -> None:
        assert self.call_made is None, "a Standby takes one call"
        self.call_made = (function, arguments)
        if self.process is None:
            return
        try:
            self.calls.send((function, arguments))
        except Exception:  # (unpicklable, or the child is gone): computed here
            self.close()

    def result(self) -> Any:
        """The call's result: the child's, else computed here."""
        assert self.call_made is not None, "call() first"
        function, arguments = self.call_made
        if self.process is None:
            return function(*arguments)
        try:
            message = self.connection.recv()
        except (EOFError, OSError):
            message = None
        self.close()
        if isinstance(message, tuple) and message[0] == "done":
            return message[1]
        return function(*arguments)

    def close(self) -> None:
        """End the child (told to, if it still waits for a call)."""
        if self.process is None:
            return
        if self.call_made is None:
            with contextlib.suppress(Exception):
                self.calls.send(None)
        self.calls.close()
        self.connection.close()
        end_child(self.process)
        self.process = None

    def __enter__(self) -> Standby:
        return self

    def __exit__(self, *failure: object) -> None:
        self.close()
