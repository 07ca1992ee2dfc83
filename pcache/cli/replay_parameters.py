"""The `replay` command's parameters, made from the drivers' declared options, and its help
grouped in panels (input, simulate, engine, endpoint, fleet, rendering and hashing, output).

Each option of a driver is declared once, beside its field (`pcache.options.declared`); the
options several commands share are declared once in `pcache.cli.options`; the few that only
the command has (the driver chosen, the views) are declared here.
"""

from __future__ import annotations

import inspect
import typing
from copy import copy
from typing import Annotated, Any

import typer
from typer.core import TyperCommand

from pcache.cli import options as shared
from pcache.options.declared import PANELS, Declared
from pcache.replayer.endpoint.options import EndpointOptions
from pcache.replayer.engine.options import EngineOptions
from pcache.replayer.options import declared_fields
from pcache.replayer.simulate.options import TTFT_FLAGS, SimulateOptions

DRIVERS = (SimulateOptions, EngineOptions, EndpointOptions)
"""The drivers' options classes, in the order their options are listed."""
COMMAND_ONLY = {
    "simulate": Declared(
        ("--simulate",), "Simulate the cache, no model (the default).", "simulate", False, bool
    ),
    "gpu": Declared(("--gpu",), "The same as --engine gpu.", "engine", False, bool),
    "plot": Declared(
        ("--plot",),
        "PNG: the capacity sweep's or the --replicas/--router grid's chart, or --engine's TTFT"
        " CDFs (cache on, off).",
        "output",
        type=str | None,
    ),
    "output": Declared(
        ("--output", "-o"), "Write one JSON line per request here.", "output", type=str | None
    ),
    "progress": Declared(
        ("--progress/--no-progress",), "Progress bar on stderr.", "output", type=bool | None
    ),
    "redact": Declared(
        ("--redact",),
        "Nothing a request or its response said in the output: a server's error text as its"
        " shape, no generated token ids.",
        "output",
        False,
        bool,
    ),
}
"""Options of the command alone: the driver chosen (with `--engine`, `--endpoint`) and the
views of the result."""
SHARED = {
    "replicas": (shared.ReplicasOpt, None, "fleet"),
    "router": (shared.RouterOpt, shared.DEFAULT_ROUTER, "fleet"),
    "router_param": (shared.RouterParamOpt, None, "fleet"),
    "chars_per_token": (shared.CharsPerTokenOpt, shared.DEFAULT_CHARS_PER_TOKEN, "fleet"),
    "tokenizer": (shared.TokenizerOpt, None, "settings"),
    "block_size": (shared.ReplayBlockSizeOpt, None, "settings"),
    "hash_algo": (shared.HashAlgoOpt, shared.DEFAULT_HASH_ALGO, "settings"),
    "cache_salt": (shared.CacheSaltOpt, None, "settings"),
    "date": (shared.DateOpt, shared.DEFAULT_DATE, "settings"),
    "jobs": (shared.JobsOpt, None, "settings"),
    "executor": (shared.ExecutorOpt, shared.DEFAULT_EXECUTOR, "settings"),
    "ray_address": (shared.RayAddressOpt, None, "settings"),
    "format": (shared.FormatOpt, "text", "output"),
    "column": (shared.ColumnOpt, None, "input"),
}
"""Options declared in `pcache.cli.options` for several commands: (declaration, default,
panel)."""
TTFT_PARAMETERS = {f"ttft_{name}": name for name in TTFT_FLAGS}
"""The parameters of the TTFT model's coefficients, to the `TtftModel` field each sets."""


def _option(declared: Declared, hint: Any) -> Any:
    """The `Annotated` parameter type of a declared option."""
    extra: dict[str, Any] = {}
    if declared.metavar is not None:
        extra["metavar"] = declared.metavar
    if declared.minimum is not None:
        extra["min"] = declared.minimum
    if declared.maximum is not None:
        extra["max"] = declared.maximum
    if declared.checked is not None:
        extra["callback"] = shared.in_range(*declared.checked)
    info = typer.Option(
        *declared.flags, help=declared.help, rich_help_panel=PANELS[declared.panel], **extra
    )
    return Annotated[declared.type or hint, info]


def _in_panel(alias: Any, panel: str) -> Any:
    """A shared `Annotated` option, listed in `panel`."""
    hint, info = typing.get_args(alias)
    info = copy(info)
    info.rich_help_panel = PANELS[panel]
    return Annotated[hint, info]


def driver_fields() -> dict[str, tuple[Declared, Any]]:
    """Every driver's declared options by field, with the field's type: one declaration per
    field, whichever drivers have it."""
    found: dict[str, tuple[Declared, Any]] = {}
    for options_class in DRIVERS:
        hints = typing.get_type_hints(options_class)
        for name, declared in declared_fields(options_class).items():
            known = found.setdefault(name, (declared, hints[name]))
            assert known[0] is declared, f"{name} is declared twice"
    return found


def parameters() -> list[inspect.Parameter]:
    """The command's parameters: the trace, then every option, panel by panel."""
    keyword = inspect.Parameter.KEYWORD_ONLY
    trace_help = "Trace: request JSONL, Mooncake or Bailian hash-id JSONL, Batch."
    made = [
        inspect.Parameter(
            "trace", keyword, annotation=Annotated[str, typer.Argument(help=trace_help)]
        )
    ]
    declared = {name: (item, item.type) for name, item in COMMAND_ONLY.items()}
    declared |= driver_fields()
    declared |= {name: (TTFT_FLAGS[field], float) for name, field in TTFT_PARAMETERS.items()}
    entries = [
        (name, _option(item, hint), item.command_default, item.panel)
        for name, (item, hint) in declared.items()
    ]
    entries += [
        (name, _in_panel(alias, panel), default, panel)
        for name, (alias, default, panel) in SHARED.items()
    ]
    order = list(PANELS)
    for name, annotation, default, _ in sorted(entries, key=lambda entry: order.index(entry[3])):
        made.append(inspect.Parameter(name, keyword, default=default, annotation=annotation))
    return made


def driver_values(values: dict[str, Any], **made: Any) -> dict[str, Any]:
    """The drivers' fields as the command line gives them (`Declared.read` applied), taken out
    of `values`, with the fields `made` from several flags (`ttft`, `fleet`): in the order of
    the drivers' fields, the order in which a field of another driver is refused."""
    given = dict(made)
    for name, (declared, _) in driver_fields().items():
        value = values.pop(name)
        given[name] = declared.read(value) if declared.read is not None else value
    order = {name: index for index, name in enumerate(_field_order())}
    return dict(sorted(given.items(), key=lambda item: order[item[0]]))


def _field_order() -> list[str]:
    from dataclasses import fields

    names = [item.name for options_class in DRIVERS for item in fields(options_class)]
    return list(dict.fromkeys(names))


class PanelCommand(TyperCommand):
    """A command whose plain-text `--help` lists its options in panels (each option's
    `rich_help_panel`, in `PANELS`' order; `--help` itself under the last)."""

    def format_options(self, ctx, formatter) -> None:  # type: ignore[override]
        arguments, panels = [], {title: [] for title in PANELS.values()}
        last = list(PANELS.values())[-1]
        for param in self.get_params(ctx):
            row = param.get_help_record(ctx)
            if row is None:
                continue
            if param.param_type_name == "argument":
                arguments.append(row)
            else:
                panels[getattr(param, "rich_help_panel", None) or last].append(row)
        if arguments:
            with formatter.section("Arguments"):
                formatter.write_dl(arguments)
        widest = max(len(row[0]) for rows in panels.values() for row in rows)
        first_column = min(widest, 30) + 2
        for title, rows in panels.items():
            if rows:
                with formatter.section(title):
                    _write_rows(formatter, rows, first_column)


def _write_rows(formatter, rows: list[tuple[str, str]], first_column: int) -> None:
    """click's definition list with a first column of the width given (every panel alike)."""
    try:
        from typer._click.formatting import wrap_text
    except ImportError:  # typer before 0.25 uses click itself
        from click.formatting import wrap_text

    indent = " " * formatter.current_indent
    for first, second in rows:
        formatter.write(f"{indent}{first}")
        if not second:
            formatter.write("\n")
            continue
        if len(first) <= first_column - 2:
            formatter.write(" " * (first_column - len(first)))
        else:
            formatter.write("\n" + " " * (first_column + formatter.current_indent))
        text_width = max(formatter.width - first_column - 2, 10)
        lines = wrap_text(second, text_width, preserve_paragraphs=True).splitlines()
        formatter.write(f"{lines[0]}\n")
        for line in lines[1:]:
            formatter.write(f"{'':>{first_column + formatter.current_indent}}{line}\n")
