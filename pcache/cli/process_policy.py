"""What the command line does to its own process around a command, and a library call never
does: the cyclic collector paused while the command builds what it keeps to its end
(`pcache.process.gc_pause`), and the process ended, once the output is flushed, without the
interpreter's teardown.

A large lint leaves millions of objects that the interpreter would take a quarter of a second
or more to free one by one, and what a command drops while the collector is paused is not
freed either: ending without the teardown frees none of it. That is only for commands that
start nothing that needs stopping (servers, Ray, child processes that outlive them) and write
everything through stdout, stderr and files they have closed.

`main` runs the command line with a `CommandLineProcess` as the click context's object;
a command registered through `applied` asks it for what its `ProcessPolicy` says. A command
run any other way (a test's `CliRunner`, a library) finds no `CommandLineProcess` and runs
as plain code.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Arguments = dict[str, Any]
"""A command's arguments, by parameter name, as the command line parsed them."""


def never(arguments: Arguments) -> bool:
    """A policy answer: not for this command."""
    return False


def always(arguments: Arguments) -> bool:
    """A policy answer: for every run of this command."""
    return True


@dataclass(frozen=True, slots=True)
class ProcessPolicy:
    """What a command asks of the process the command line runs it in, given its arguments:
    the collector paused around it, and an exit without the interpreter's teardown."""

    pause_gc: Callable[[Arguments], bool] = never
    fast_exit: Callable[[Arguments], bool] = never


class CommandLineProcess:
    """The process `pcache` runs in, held for one run of the command line: what the command
    asked of it, applied around the command and at its exit."""

    def __init__(self) -> None:
        self.fast_exit = False
        """The command asked to end without the interpreter's teardown."""

    def run(self, policy: ProcessPolicy, command: Callable[..., Any], arguments: Arguments):
        """`command(**arguments)`, the collector paused around it where the policy says so."""
        self.fast_exit = policy.fast_exit(arguments)
        if not policy.pause_gc(arguments):
            return command(**arguments)
        from pcache.process.gc_pause import paused_gc

        with paused_gc():
            return command(**arguments)

    def exit(self, code: object) -> None:
        """Exit with `code` as `sys.exit` would; without the interpreter's teardown when the
        command asked for it and nothing measures the run (coverage, a tracer)."""
        if self.fast_exit and (code is None or isinstance(code, int)) and _unobserved():
            try:
                sys.stderr.flush()
            finally:
                os._exit(code or 0)
        sys.exit(code)


def applied(command: Callable[..., Any], policy: ProcessPolicy) -> Callable[..., Any]:
    """`command` as the command line registers it: run under `policy` when the command line
    runs it (`CommandLineProcess`), as itself otherwise. Its signature, name and help are
    the command's."""

    @functools.wraps(command)
    def run(**arguments: Any) -> Any:
        owner = command_line_process()
        if owner is None:
            return command(**arguments)
        return owner.run(policy, command, arguments)

    return run


def command_line_process() -> CommandLineProcess | None:
    """The `CommandLineProcess` of the click context running the command: None where the
    command line does not run it (a test's runner)."""
    try:  # typer's vendored click (typer >= 0.25), else click itself
        from typer._click.globals import get_current_context
    except ImportError:
        from click import get_current_context
    context = get_current_context(silent=True)
    return context.find_object(CommandLineProcess) if context is not None else None


def _unobserved() -> bool:
    return sys.gettrace() is None and sys.getprofile() is None and "coverage" not in sys.modules
