"""`pcache lint PATHS`: find what breaks prompt caching in captured requests."""

from __future__ import annotations

from typing import Annotated

import typer

from pcache.cli.options import (
    DEFAULT_BLOCK_SIZE,
    DEFAULT_DATE,
    DEFAULT_EXECUTOR,
    BlockSizeOpt,
    ColumnOpt,
    ConfigOpt,
    DateOpt,
    ExecutorOpt,
    ExtendSelectOpt,
    GroupByOpt,
    IgnoreOpt,
    JobsOpt,
    LintTokenizerOpt,
    PriceOpt,
    ProfileOpt,
    RayAddressOpt,
    RedactOpt,
    SelectOpt,
    VerboseOpt,
    say_encoder,
)

FORMATS = ("full", "concise", "json", "github", "sarif")


def lint_command(
    paths: Annotated[
        list[str] | None,
        typer.Argument(help="Request files (.json), logs (.jsonl), directories, or - for stdin."),
    ] = None,
    select: SelectOpt = None,
    extend_select: ExtendSelectOpt = None,
    ignore: IgnoreOpt = None,
    explain: Annotated[
        str | None, typer.Option("--explain", help="Print a rule's documentation and exit.")
    ] = None,
    list_rules: Annotated[
        bool, typer.Option("--list-rules", help="List every rule and exit.")
    ] = False,
    format: Annotated[
        str, typer.Option("--format", "-f", help="full, concise, json, github or sarif.")
    ] = "full",
    fix: Annotated[
        bool,
        typer.Option("--fix", help="Sort tool schema keys and tools in request files (safe)."),
    ] = False,
    exit_zero: Annotated[
        bool, typer.Option("--exit-zero", help="Exit 0 even when there are findings.")
    ] = False,
    profile: ProfileOpt = None,
    tokenizer: LintTokenizerOpt = None,
    block_size: BlockSizeOpt = DEFAULT_BLOCK_SIZE,
    date: DateOpt = DEFAULT_DATE,
    column: ColumnOpt = None,
    config: ConfigOpt = None,
    diff: Annotated[
        str | None,
        typer.Option(
            "--diff", metavar="BASE", help="Only findings the files did not have at git BASE."
        ),
    ] = None,
    write_fixed: Annotated[
        str | None,
        typer.Option(
            "--write-fixed",
            metavar="OUT",
            help="Write the fixed log the findings' tokens were replayed from (JSONL), for"
            " `pcache replay OUT --simulate`.",
        ),
    ] = None,
    group_by: GroupByOpt = None,
    price: PriceOpt = None,
    redact: RedactOpt = False,
    jobs: JobsOpt = None,
    executor: ExecutorOpt = DEFAULT_EXECUTOR,
    ray_address: RayAddressOpt = None,
    verbose: VerboseOpt = False,
) -> None:
    """Find what makes the prompt cache miss, where, and what it costs.

    Example: pcache lint samples/prompts/ --profile openai
    """
    from pcache.api import lint
    from pcache.cli import lint_output
    from pcache.errors import UsageError
    from pcache.rules import RULES, documentation

    if format not in FORMATS:
        raise UsageError(f"--format must be one of {', '.join(FORMATS)}, got {format!r}")
    if list_rules:
        lint_output.print_rules(format)
        return
    if explain is not None:
        code = explain.strip().upper()
        if code not in RULES:
            raise UsageError(f"--explain: unknown rule {explain!r}")
        lint_output.print_explanation(RULES[code], documentation(code), format)
        return
    if not paths:
        raise UsageError("no input: pass files, directories, or - for stdin")
    if verbose:
        from pathlib import Path

        from pcache.rules.config import find_config, load_config

        configured = load_config(Path(config) if config else find_config(Path.cwd())).tokenizer
        say_encoder(tokenizer or configured)
    with lint_output.progress(enabled=format not in ("json", "sarif")) as advance:
        report = lint(
            paths,
            select=select,
            extend_select=extend_select,
            ignore=ignore,
            profile=profile,
            tokenizer=tokenizer,
            block_size=block_size,
            date=date,
            config=config,
            fix=fix,
            since=diff,
            progress=advance,
            jobs=jobs,
            column=column,
            executor=executor,
            ray_address=ray_address,
            write_fixed=write_fixed,
            redact=redact,
            group_by=group_by,
            price=price,
        )
    lint_output.print_report(report, format)
    if report.failing and not exit_zero:
        raise typer.Exit(1)
