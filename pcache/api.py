"""The library API, and what the command line runs (re-exported as `pcache.diff`, ...).

`diff`, `hash`, `lint` and `replay` take request bodies (dicts), SDK objects (pydantic models:
anything with `model_dump`), or paths to JSON / JSONL files, and return the dataclasses whose
fields the commands' JSON output holds. Options left as None take the command line's defaults.
Each function imports what it needs when called.

Arguments are checked before any work (`pcache.api_arguments`): a wrong type or value, a body
that is not JSON (a set, NaN, a non-string key), one that contains itself or nests deeper than
the readers read, raise a subclass of `pcache.InputError` naming the function and argument.

The names are functions only: the code they run lives in packages of other names
(`pcache.divergence`, `pcache.rules`, `pcache.replayer`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pcache.divergence.compare import DiffResult
    from pcache.pipeline import BlockHashReport, Settings
    from pcache.replayer.options import ReplayOptions
    from pcache.replayer.run import ReplayResult
    from pcache.rules.runner import LintReport

__all__ = ["diff", "hash", "lint", "replay"]

RequestLike = Any
"""A request body (dict), an SDK object with `model_dump`, or a path (str, os.PathLike)."""


def _settings(
    function: str,
    tokenizer: str | None,
    block_size: int | None,
    hash_algo: str | None,
    cache_salt: str | None,
    date: str | None,
) -> Settings:
    from pcache import api_arguments as check
    from pcache.pipeline import Settings

    given = check.settings_values(
        function,
        tokenizer=tokenizer,
        block_size=block_size,
        hash_algo=hash_algo,
        cache_salt=cache_salt,
        date=date,
    )
    with check.named_as(function, tuple(given)):
        return Settings(**given)


def diff(
    a: RequestLike,
    b: RequestLike,
    *,
    tokenizer: str | None = None,
    block_size: int | None = None,
    hash_algo: str | None = None,
    cache_salt: str | None = None,
    date: str | None = None,
    redact: bool = False,
) -> DiffResult:
    """Where request `b` stops reusing `a`'s cached prefix, what each cache reuses, and why
    (`redact`: excerpts and details as shapes, no token ids).

    >>> result = pcache.diff(earlier_body, later_body)
    >>> result.cause.kind, result.cause.b_path, result.first_divergence_token
    """
    from pcache import api_arguments as check
    from pcache.comparison import compare

    a, b = check.request("diff", "a", a), check.request("diff", "b", b)
    settings = _settings("diff", tokenizer, block_size, hash_algo, cache_salt, date)
    redact = check.flag("diff", "redact", redact)
    with check.named_as("diff", ()):
        return compare(a, b, settings, redact=redact).result


def hash(
    request: RequestLike,
    *,
    tokenizer: str | None = None,
    block_size: int | None = None,
    hash_algo: str | None = None,
    cache_salt: str | None = None,
    date: str | None = None,
) -> BlockHashReport:
    """The token count and chained block hashes of one request (a file must hold exactly one)."""
    from pcache import api_arguments as check
    from pcache.pipeline import BlockHashReport, hash_request
    from pcache.prompt.reading.held import one_request

    request = check.request("hash", "request", request)
    settings = _settings("hash", tokenizer, block_size, hash_algo, cache_salt, date)
    with check.named_as("hash", ()):
        return BlockHashReport.of(hash_request(one_request(request), settings))


def lint(
    requests_or_paths: RequestLike | Iterable[RequestLike],
    *,
    select: list[str] | None = None,
    extend_select: list[str] | None = None,
    ignore: list[str] | None = None,
    profile: str | None = None,
    tokenizer: str | None = None,
    block_size: int | None = None,
    date: str | None = None,
    config: str | os.PathLike[str] | None = None,
    fix: bool = False,
    since: str | None = None,
    progress: Callable[[int], None] | None = None,
    jobs: int | None = None,
    column: str | None = None,
    executor: str | None = None,
    ray_address: str | None = None,
    write_fixed: str | os.PathLike[str] | None = None,
    redact: bool = False,
    group_by: list[str] | None = None,
    price: str | None = None,
) -> LintReport:
    """Find what makes the prompt cache miss, where, and what it costs.

    Paths (files, directories) are linted as the command lints them, with `[tool.pcache.lint]`
    from `config` (default: the nearest pyproject.toml with a `[tool.pcache]` table at or
    above the working directory); request bodies and SDK objects are linted in order, as the
    lines of one log. `since` (a git revision; paths only) keeps the findings new since then.
    `jobs`: threads that tokenize (default: one per core); `executor` ("local", the default,
    or "ray") where the text of JSONL logs is tokenized (`ray_address`: the Ray cluster; None:
    a local one); the report depends on neither.
    `column` names the request column of Parquet/CSV table inputs (`--column`).
    `write_fixed`: a path to write the fixed log to (every request as the fixed log that the
    findings' tokens were replayed from sends it), so `replay --simulate` can check them.
    `redact`: no string of a request in the report (values quoted as their shapes).
    `group_by`: keys the summary is also totalled by (`model`, `user`, `file`, `app`,
    `metadata.NAME`, `header.NAME`; `pcache.rules.groups`).
    `price`: a model (or family) whose price applies to every request, whatever its model;
    else each request's model is priced by the price table or `[tool.pcache.prices]`
    (`pcache.cache.prices`; the summary's `money`).
    """
    from dataclasses import replace

    from pcache import api_arguments as check
    from pcache.defaults import PROFILE_NAMES
    from pcache.prompt.reading.held import is_path, values_from
    from pcache.rules.runner import lint_paths, lint_values

    items = check.requests("lint", "requests_or_paths", requests_or_paths)
    items = items if isinstance(items, list) else [items]
    select = check.codes("lint", "select", select)
    extend_select = check.codes("lint", "extend_select", extend_select)
    ignore = check.codes("lint", "ignore", ignore)
    profile = check.text("lint", "profile", profile, PROFILE_NAMES)
    tokenizer = check.tokenizer("lint", tokenizer)
    block_size = check.block_size("lint", block_size)
    date = check.text("lint", "date", date)
    config = check.optional_path("lint", "config", config)
    fix = check.flag("lint", "fix", fix)
    since = check.text("lint", "since", since)
    progress = check.callback("lint", "progress", progress)
    jobs = check.jobs("lint", jobs)
    executor = check.executor("lint", executor)
    ray_address = check.text("lint", "ray_address", ray_address)
    column = check.text("lint", "column", column)
    write_fixed = check.optional_path("lint", "write_fixed", write_fixed)
    redact = check.flag("lint", "redact", redact)
    group_by = check.keys("lint", "group_by", group_by)
    price = check.text("lint", "price", price)
    paths = [os.fspath(item) for item in items if is_path(item)]
    if paths and len(paths) != len(items):
        raise check.ArgumentValueError(
            "lint", "requests_or_paths", "lint takes paths or requests, not both in one call"
        )
    if not paths and (since is not None or fix or column is not None):
        argument = "since" if since is not None else "fix" if fix else "column"
        raise check.ArgumentValueError(
            "lint", argument, f"{argument} applies to files, not to requests in memory"
        )
    options, settings = lint_options(
        select=select,
        extend_select=extend_select,
        ignore=ignore,
        profile=profile,
        tokenizer=tokenizer,
        block_size=block_size,
        date=date,
        config=config,
        redact=redact,
        group_by=group_by,
        jobs=jobs,
        executor=executor,
        ray_address=ray_address,
        column=column,
        fix=fix,
        write_fixed=write_fixed,
        price=price,
    )
    with check.named_as("lint", ("since", "fix", "column")):
        if not paths:
            return lint_values(values_from(items), options, source="requests")
        report = lint_paths(paths, options, settings, progress)
        if since is not None:
            report = _only_new(report, paths, since, replace(options, fix=False), settings)
        return report


def lint_options(
    *,
    select: list[str] | None = None,
    extend_select: list[str] | None = None,
    ignore: list[str] | None = None,
    profile: str | None = None,
    tokenizer: str | None = None,
    block_size: int | None = None,
    date: str | None = None,
    config: str | os.PathLike[str] | None = None,
    redact: bool = False,
    group_by: list[str] | None = None,
    jobs: int | None = None,
    executor: str | None = None,
    ray_address: str | None = None,
    column: str | None = None,
    fix: bool = False,
    write_fixed: str | os.PathLike[str] | None = None,
    price: str | None = None,
    function: str = "lint",
) -> tuple[Any, Any]:
    """The options `lint` runs with, and the `[tool.pcache]` settings they were read with
    (`config`, else the nearest pyproject.toml): for the commands that lint as lint does
    (`watch`). The arguments are `lint`'s, already checked."""
    from pathlib import Path

    from pcache import api_arguments as check
    from pcache.cache.prices import PriceBook
    from pcache.defaults import DEFAULT_EXECUTOR
    from pcache.pipeline import Settings
    from pcache.rules import RULES
    from pcache.rules.config import find_config, load_config
    from pcache.rules.groups import check_keys
    from pcache.rules.runner import LintOptions
    from pcache.rules.selection import SelectionInput, resolve

    config_path = Path(config) if config else find_config(Path.cwd())
    settings = load_config(config_path)
    named = (
        *("select", "extend_select", "ignore", "date", "profile", "ray_address", "group_by"),
        "price",
    )
    with check.named_as(function, named):
        keys = check_keys(group_by or [], settings.apps)
        PriceBook(settings.prices, price)  # a price named is one pcache knows
        selection = resolve(
            settings.selection,
            SelectionInput(select, extend_select or [], ignore or []),
            RULES,
            source=f"{config_path}" if config_path else "config",
        )
        defaults = Settings()
        options = LintOptions(
            settings=Settings(
                tokenizer=tokenizer or settings.tokenizer or defaults.tokenizer,
                profile=profile or settings.profile or defaults.profile,
                block_size=defaults.block_size if block_size is None else block_size,
                date=defaults.date if date is None else date,
                jobs=jobs,
                executor=executor or DEFAULT_EXECUTOR,
                ray_address=ray_address,
            ),
            selection=selection,
            fix=fix,
            column=column,
            template_chosen=bool(tokenizer or settings.tokenizer),
            write_fixed=os.fspath(write_fixed) if write_fixed is not None else None,
            redact=redact,
            group_by=keys,
            price=price,
            prices=tuple(settings.prices.values()),
        )
    return options, settings


def _only_new(report: LintReport, paths: list[str], since: str, options: Any, settings: Any):
    """`report` keeping only the findings the files did not have at revision `since`."""
    import tempfile
    from pathlib import Path

    from pcache.errors import UsageError
    from pcache.rules.baseline import files_at_revision, introduced, repository_root
    from pcache.rules.runner import expand_paths, lint_paths

    if "-" in paths:
        raise UsageError("--diff compares files with a git revision; stdin has no history")
    root = repository_root(Path.cwd())
    with tempfile.TemporaryDirectory(prefix="pcache-base-") as directory:
        base_root = Path(directory).resolve()
        base_files = files_at_revision(since, expand_paths(paths), root, base_root)
        base = lint_paths(base_files, options, settings).diagnostics if base_files else []
        report.diagnostics = introduced(report.diagnostics, base, root, base_root)
    selection = options.selection
    report.failing = sum(
        1 for d in report.diagnostics if d.severity != "info" or selection.is_explicit(d.code)
    )
    return report


def replay(
    trace: str | os.PathLike[str] | Iterable[RequestLike],
    options: ReplayOptions | None = None,
    *,
    progress: Callable[[int], None] | None = None,
    redact: bool = False,
    **given: Any,
) -> ReplayResult:
    """Replay a trace (a file, or request bodies in arrival order) against a prefix cache.

    `options` are one driver's (`pcache.replayer.options`: `SimulateOptions`, `EngineOptions`,
    `EndpointOptions`), or are made from keywords: `mode` (simulate, engine or endpoint) and
    the fields of that driver's options (`policy`, `cache_blocks`, `model`, ...), with
    `tokenizer`, `block_size`, `hash_algo`, `cache_salt` and `date` for its `settings`; given
    beside `options`, keywords change them. A refused option is an `ArgumentValueError`
    naming the keyword (`cache_blocks must be at least 1, got 0`), with the command's words for
    its flag as its `command_line`. `redact`: a server's error texts as their shapes and no
    generated token ids in the result.
    """
    from pcache import api_arguments as check
    from pcache.prompt.reading.held import is_path, values_from
    from pcache.replayer.options import ReplayOptions
    from pcache.replayer.run import replay_options, run_replay

    trace = check.requests("replay", "trace", trace)
    if options is not None and not isinstance(options, ReplayOptions):
        raise check.ArgumentTypeError(
            "replay",
            "options",
            "options must be a driver's options (SimulateOptions, ...)"
            f" or None, got {check.kind_of(options)}",
        )
    progress = check.callback("replay", "progress", progress)
    redact = check.flag("replay", "redact", redact)
    if options is None or given:
        mode, given = check.replay_keywords("replay", given)
        mode = mode or (options.mode if options is not None else "simulate")
        with check.named_as("replay", given):
            options = replay_options(mode, options, **given)
    source = os.fspath(trace) if is_path(trace) else tuple(values_from(trace))
    if not redact:  # (the redaction modules compile their patterns when imported)
        with check.named_as("replay", check.replay_fields()):
            return run_replay(source, options, progress=progress)
    from pcache.replayer.redaction import redact_result
    from pcache.text.redaction import redacting

    with check.named_as("replay", check.replay_fields()), redacting():
        result = run_replay(source, options, progress=progress)
        redact_result(result)
        return result
