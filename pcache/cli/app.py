"""The `pcache` command: a registration list and the mapping of errors to exit codes."""

from __future__ import annotations

import errno
import io
import os

import typer
from typer.core import TyperGroup

from pcache.cli.process_policy import CommandLineProcess, ProcessPolicy, always, applied
from pcache.version import __version__

_OUTPUT_ERRNOS = {errno.ENOSPC, errno.EIO, errno.EDQUOT, errno.EFBIG}
"""Errors of writing the output (input files' errors are InputErrors naming the file)."""
EXIT_STDOUT_CLOSED = 141
"""Exit code when standard output closed before all output was written (`| head`): 128 +
SIGPIPE, as a shell reports a command killed by it, so a cut report never reads as success."""


def silence_closed_stdout() -> None:
    """Point stdout at the null device, so the interpreter's last flush cannot fail again."""
    import sys

    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)
    except (OSError, ValueError):  # no file descriptor (a test's captured stdout)
        pass


class _ClosedOutput(io.TextIOBase):
    """Standard output that was closed before pcache started: every write is a broken pipe."""

    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "standard output is closed")

    @property
    def buffer(self):
        return self

    def fileno(self) -> int:
        raise BrokenPipeError(32, "standard output is closed")


def _click_exceptions():
    """Typer's usage-error classes: its vendored click (typer >= 0.25) or click itself."""
    try:
        from typer._click import exceptions
    except ImportError:
        from click import exceptions
    return exceptions.ClickException, getattr(exceptions, "NoArgsIsHelpError", ())


class PcacheGroup(TyperGroup):
    """Maps pcache's typed errors to one line on stderr and their exit code, in every runner."""

    def invoke(self, ctx):  # type: ignore[override]
        from pcache.cli.console import error
        from pcache.errors import PcacheError

        click_exception, help_shown = _click_exceptions()

        try:
            return super().invoke(ctx)
        except PcacheError as failure:
            error(getattr(failure, "command_line", None) or str(failure))
            ctx.exit(failure.exit_code)
        except typer.Exit as done:
            ctx.exit(done.exit_code)
        except (typer.Abort, help_shown):
            raise
        except click_exception as failure:
            error(failure.format_message())
            ctx.exit(2)
        except KeyboardInterrupt:
            ctx.exit(130)
        except BrokenPipeError:
            silence_closed_stdout()
            ctx.exit(EXIT_STDOUT_CLOSED)
        except Exception as failure:
            if isinstance(failure, OSError) and failure.errno in _OUTPUT_ERRNOS:
                error(f"cannot write the output: {failure.strerror or failure}")
                ctx.exit(2)
            if os.environ.get("PCACHE_DEBUG"):
                raise
            error(f"internal error: {type(failure).__name__}: {failure}")
            ctx.exit(2)


app = typer.Typer(
    cls=PcacheGroup,
    name="pcache",
    help=(
        "Why is our prompt cache hit rate so low, and what would fixing it buy us?\n\n"
        "Example: pcache diff samples/a.json samples/b.json"
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"pcache {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Show the version and exit."
    ),
) -> None:
    """Why is our prompt cache hit rate so low, and what would fixing it buy us?"""


def _runs_locally(arguments: dict) -> bool:
    """Whether the command's work stays in this process (no Ray cluster to stop at exit)."""
    from pcache.defaults import DEFAULT_EXECUTOR

    return arguments.get("executor", DEFAULT_EXECUTOR) == DEFAULT_EXECUTOR


def _simulates(arguments: dict) -> bool:
    """Whether `replay` simulates (no --engine, --gpu or --endpoint): the engine's and an
    endpoint's runs, long and full of short-lived cycles (torch, asyncio), keep the collector."""
    from pcache.cli.replay import chosen_mode

    return chosen_mode(arguments) == "simulate"


BATCH = ProcessPolicy(pause_gc=always, fast_exit=_runs_locally)
"""Lint and report: build what they keep to the end, write it, and exit."""
REPLAY = ProcessPolicy(pause_gc=_simulates)
"""Replay: a simulation keeps its trace and pool to the end; its exit stops what it started."""


def _register() -> None:
    from pcache.cli import diff, generate, hash, lint, replay, report, serve, trace, watch

    app.command("hash")(hash.hash_command)
    app.command("diff")(diff.diff_command)
    app.command("lint")(applied(lint.lint_command, BATCH))
    app.command("replay", cls=replay.PanelCommand)(applied(replay.replay_command, REPLAY))
    app.command("generate")(generate.generate_command)
    app.command("serve")(serve.serve_command)
    app.command("report")(applied(report.report_command, BATCH))
    app.command("watch")(watch.watch_command)
    app.add_typer(trace.trace_app, name="trace")


_register()


def main() -> None:
    """Console entry point."""
    import sys

    from pcache.engine.allocator import ask_for_huge_pages

    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    ask_for_huge_pages()  # before any command imports torch
    if sys.stderr is None:  # started with 2>&-: messages go nowhere, exit codes still tell
        sys.stderr = open(os.devnull, "w")  # noqa: SIM115 (lives as long as the process)
    if sys.stdout is None:  # started with >&-: writing output is a closed pipe
        sys.stdout = _ClosedOutput()
    process = CommandLineProcess()
    try:
        app(prog_name="pcache", obj=process)
    except SystemExit as done:
        code = done.code
    else:
        code = 0
    try:
        sys.stdout.flush()  # output still buffered meets a closed pipe here
    except BrokenPipeError:
        silence_closed_stdout()
        code = EXIT_STDOUT_CLOSED
    process.exit(code)
