"""`pcache report LOG_OR_TRACE`: one self-contained HTML page of lint, prefix tree and replay."""

from __future__ import annotations

import shlex
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated

import typer

from pcache.cli.options import (
    DEFAULT_BLOCK_SIZE,
    DEFAULT_CHARS_PER_TOKEN,
    DEFAULT_DATE,
    DEFAULT_EXECUTOR,
    DEFAULT_MODEL,
    DEFAULT_ROUTER,
    DEFAULT_TOKENIZER,
    BlockSizeOpt,
    CharsPerTokenOpt,
    ColumnOpt,
    DateOpt,
    ExecutorOpt,
    GroupByOpt,
    JobsOpt,
    LintTokenizerOpt,
    PriceOpt,
    RayAddressOpt,
    RedactOpt,
    ReplicasOpt,
    RouterOpt,
    RouterParamOpt,
    VerboseOpt,
    say_encoder,
)
from pcache.defaults import PROFILE_NAMES

FORMATS = ("html", "json")

if TYPE_CHECKING:
    from pcache.report.build import Report, ReportOptions


def report_command(
    paths: Annotated[
        list[str],
        typer.Argument(help="A request log (.jsonl), request files or directories, or a trace."),
    ],
    output: Annotated[
        str, typer.Option("--output", "-o", help="The HTML file to write (json: - for stdout).")
    ] = "report.html",
    replay: Annotated[
        list[str] | None,
        typer.Option(
            "--replay", help="A per-request file of pcache replay -o (repeatable): TTFT CDFs."
        ),
    ] = None,
    calibration: Annotated[
        str | None,
        typer.Option(
            "--calibration",
            help="The TTFT model fitted by pcache replay --engine --save-calibration.",
        ),
    ] = None,
    tokenizer: LintTokenizerOpt = DEFAULT_TOKENIZER,
    profile: Annotated[
        str,
        typer.Option("--profile", help=f"Cache that prices findings: {', '.join(PROFILE_NAMES)}."),
    ] = "vllm",
    model: Annotated[
        str,
        typer.Option("--model", "-m", help="Model shape for KV sizes (a preset or config.json)."),
    ] = DEFAULT_MODEL,
    block_size: BlockSizeOpt = DEFAULT_BLOCK_SIZE,
    date: DateOpt = DEFAULT_DATE,
    column: ColumnOpt = None,
    sweep_points: Annotated[
        int,
        typer.Option("--sweep-points", min=2, max=64, help="Cache sizes in the capacity sweep."),
    ] = 8,
    format: Annotated[
        str, typer.Option("--format", "-f", help="html (the page) or json (the data behind it).")
    ] = "html",
    jobs: JobsOpt = None,
    replicas: ReplicasOpt = None,
    router: RouterOpt = DEFAULT_ROUTER,
    router_param: RouterParamOpt = None,
    chars_per_token: CharsPerTokenOpt = DEFAULT_CHARS_PER_TOKEN,
    executor: ExecutorOpt = DEFAULT_EXECUTOR,
    ray_address: RayAddressOpt = None,
    group_by: GroupByOpt = None,
    price: PriceOpt = None,
    redact: RedactOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Write one HTML page (everything inline, opens offline) of what breaks the cache.

    Example: pcache report samples/prompts -o report.html
    """
    from pcache.cli.console import stderr, write_json
    from pcache.errors import UsageError
    from pcache.files import check_writable, write_atomically
    from pcache.pipeline import Settings, validate_date
    from pcache.replayer.fleet.options import fleet_from_flags
    from pcache.report.build import ReportOptions, check_inputs

    if format not in FORMATS:
        raise UsageError(f"--format must be html or json, got {format!r}")
    if column is not None:  # tables found in directories read the named column too
        from pcache.rules.runner import find_inputs

        paths = find_inputs(list(paths), column).files
    check_inputs(paths)
    fleet = fleet_from_flags(replicas, router, router_param, chars_per_token)
    to_stdout = format == "json" and output == "-"
    if output == "-" and not to_stdout:
        raise UsageError("--format html writes a file: give -o report.html")
    if not to_stdout:
        check_writable(output)
    if verbose:
        say_encoder(tokenizer)
    options = ReportOptions(
        paths=list(paths),
        replay_files=list(replay or []),
        calibration=calibration,
        settings=Settings(
            tokenizer=tokenizer,
            profile=profile,
            block_size=block_size,
            date=validate_date(date),
            jobs=jobs,
            executor=executor,
            ray_address=ray_address,
        ),
        model=model,
        sweep_points=sweep_points,
        fleet=fleet,
        redact=redact,
        group_by=tuple(group_by or ()),
        price=price,
    )
    if format == "json":
        report = _build(options, None)
        import orjson

        data = orjson.dumps(report.to_dict(), option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2)
        if to_stdout:
            write_json(data)
        else:
            write_atomically(output, [data + b"\n"])
        return
    from pcache.cli.chart_worker import ChartWorker
    from pcache.cli.process_policy import command_line_process
    from pcache.report.page import chart_calls, render_page

    command = shlex.join(["pcache", "report", *sys.argv[2:]]) if _from_cli() else "pcache report"
    # the command line's run starts a worker now that imports matplotlib as the log is linted
    # and draws the charts while this process grows the prefix tree and fills the page
    jobs = options.settings.job_count if command_line_process() is not None else 1
    with ChartWorker(jobs) as drawing:
        if drawing.running:
            report = _build(options, lambda report: drawing.draw(chart_calls(report)))
            page = render_page(report, command, drawing.charts)
        else:
            page = render_page(_build(options, None), command)
    write_atomically(output, [page.encode()])
    stderr.print(f"wrote {output}", markup=False, highlight=False)


def _build(options: ReportOptions, replayed: Callable[[Report], None] | None) -> Report:
    """`build_report`, its stages shown on a terminal."""
    from pcache.cli.console import stderr
    from pcache.report.build import build_report

    if not sys.stderr.isatty():
        return build_report(options, None, replayed)
    with stderr.status("pcache report") as status:
        return build_report(options, lambda text: status.update(f"pcache report: {text}"), replayed)


def _from_cli() -> bool:
    return len(sys.argv) > 1 and sys.argv[1] == "report"
