"""Forked children for lint's token stage (`pcache.rules.token_worker`): `fork_child` starts
one that runs a target over what this process holds, `end_child` waits for it to exit.

A forked child sees this process's memory as the fork left it (no copy of the inputs is
sent). Only on Linux (macOS's system libraries are not safe to use in a forked child; Windows
does not fork) and with more than one core to run on (`jobs`); where no child can be had, the
caller does the work itself.
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
