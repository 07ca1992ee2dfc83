"""`Forked(function, *arguments)`: a pure computation over what this process holds, run in a
forked child while this process goes on with other work.

The child sees this process's memory as the fork left it (no copy of the inputs is sent) and
sends back the pickled result. `result()` waits for it; where no child could be forked, or the
child failed or went away, it computes the result here, so that the caller gets the same value
either way. Only on Linux (macOS's system libraries are not safe to use in a forked child;
Windows does not fork) and with more than one core to run on (`jobs`).
"""

from __future__ import annotations

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
