"""The `pcache` command: a registration list and the mapping of errors to exit codes."""

from __future__ import annotations

import errno
import io
import os
from typing import Any

import typer
from typer.core import TyperGroup

from pcache.cli import plain_values
from pcache.cli.commands import LazyCommands, Registered, build
from pcache.cli.process_policy import CommandLineProcess, ProcessPolicy, always
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
    """Maps pcache's typed errors to one line on stderr and their exit code, in every runner;
    builds each command the first time it is looked up (`COMMANDS`)."""

    def __init__(self, **attributes: Any) -> None:
        super().__init__(**attributes)
        self.commands = LazyCommands(COMMANDS, lambda name: build(name, COMMANDS[name], **SETTINGS))
        plain_values.install(self, subcommands=False)

    def list_commands(self, ctx) -> list[str]:  # type: ignore[override]
        return list(self.commands)

    def format_commands(self, ctx, formatter) -> None:  # type: ignore[override]
        """The command list, as Typer writes it, from each command's registered summary."""
        commands = self.commands
        assert isinstance(commands, LazyCommands)
        names = self.list_commands(ctx)
        listed = [(name, commands.listed(name)) for name in names]
        listed = [(name, command) for name, command in listed if not command.hidden]
        if not listed:
            return
        limit = formatter.width - 6 - max(len(name) for name, _ in listed)
        with formatter.section("Commands"):
            formatter.write_dl(
                [(name, command.get_short_help_str(limit)) for name, command in listed]
            )

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


SETTINGS: dict[str, Any] = {
    "add_completion": False,
    "pretty_exceptions_enable": False,
    "rich_markup_mode": None,
}
"""The Typer settings of the group, which its commands are built with too."""
app = typer.Typer(
    cls=PcacheGroup,
    name="pcache",
    help=(
        "Why is our prompt cache hit rate so low, and what would fixing it buy us?\n\n"
        "Example: pcache diff samples/a.json samples/b.json"
    ),
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    **SETTINGS,
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


COMMANDS = {
    "hash": Registered(
        "pcache.cli.hash:hash_command", "Print the token count and block hashes of a request."
    ),
    "diff": Registered(
        "pcache.cli.diff:diff_command",
        "Show where B stops reusing A's cached prefix, what each cache reuses, and why.",
    ),
    "lint": Registered(
        "pcache.cli.lint:lint_command",
        "Find what makes the prompt cache miss, where, and what it costs.",
        policy=BATCH,
    ),
    "replay": Registered(
        "pcache.cli.replay:replay_command",
        "Replay a trace against a prefix cache: simulated, or measured through the engine.",
        policy=REPLAY,
        command_class="PanelCommand",
    ),
    "generate": Registered(
        "pcache.cli.generate:generate_command",
        "Generate greedily with the built-in paged-attention engine.",
    ),
    "serve": Registered(
        "pcache.cli.serve:serve_command",
        "Serve a model over HTTP: /v1/chat/completions, /v1/completions, /tokenize, /metrics.",
    ),
    "report": Registered(
        "pcache.cli.report:report_command",
        "Write one HTML page (everything inline, opens offline) of what breaks the cache.",
        policy=BATCH,
    ),
    "watch": Registered(
        "pcache.cli.watch:watch_command",
        "Lint a growing log as it grows: /metrics for Prometheus, a live page, --once for cron.",
    ),
    "trace": Registered("pcache.cli.trace:trace_app", "Work with replay traces."),
}
"""The commands, in the order `pcache --help` lists them; each module is imported only when
its command runs or shows its own help (`pcache.cli.commands`)."""


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
