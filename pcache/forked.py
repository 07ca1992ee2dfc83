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


class Forked:
    """`function(*arguments)`, computed in a forked child when that can run beside this
    process."""

    def __init__(self, function: Callable[..., Any], *arguments: Any, jobs: int = 1):
        self.function = function
        self.arguments = arguments
        self.process: Any = None
        self.connection: Any = None
        if jobs > 1 and sys.platform.startswith("linux"):
            self._start()

    def _start(self) -> None:
        import multiprocessing

        context = multiprocessing.get_context("fork")
        receiving, sending = context.Pipe(duplex=False)
        try:
            process = context.Process(target=self._child, args=(sending,), daemon=True)
            process.start()
        except OSError:  # no process to be had (limits, memory): computed here
            receiving.close()
            return
        finally:
            sending.close()
        self.process, self.connection = process, receiving

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


JOIN_TIMEOUT_S = 5.0
"""How long a child that has sent everything may take to exit before it is killed."""


def end_child(process: Any) -> None:
    """Wait for a child to exit (killed after `JOIN_TIMEOUT_S`)."""
    process.join(JOIN_TIMEOUT_S)
    if process.is_alive():
        process.kill()
        process.join()
