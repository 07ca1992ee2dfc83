"""The `pcache` command: a registration list and the mapping of errors to exit codes."""

from __future__ import annotations

import os

import typer
from typer.core import TyperGroup

from pcache import __version__


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
            error(str(failure))
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
            ctx.exit(0)
        except Exception as failure:
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


def _register() -> None:
    from pcache.cli import diff, generate, hash, lint, replay, report, serve, trace

    app.command("hash")(hash.hash_command)
    app.command("diff")(diff.diff_command)
    app.command("lint")(lint.lint_command)
    app.command("replay")(replay.replay_command)
    app.command("generate")(generate.generate_command)
    app.command("serve")(serve.serve_command)
    app.command("report")(report.report_command)
    app.add_typer(trace.trace_app, name="trace")


_register()


def main() -> None:
    """Console entry point."""
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    app(prog_name="pcache")
